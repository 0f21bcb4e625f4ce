// turboquant._turboquant: the C++ half of the Python package. The public
// names, their defaults and docstrings are in turboquant/__init__.py.
#include "bindings.hpp"

NB_MODULE(_turboquant, m) {
  m.doc() = "turboquant's C++ library (see the turboquant package for the documented API)";
  tqpy::bind_layout(m);
  tqpy::bind_ops(m);
  tqpy::bind_case(m);
  tqpy::bind_check(m);
  tqpy::bind_routes(m);
}
