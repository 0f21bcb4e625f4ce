// The list of backends. Adding one: a new file in this directory with its
// factory (declared in registry.hpp) and one line below.
#include "registry.hpp"

namespace turboquant {

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> all = {
      &registry::reference_backend(),
      &registry::cpu_isa_backend("scalar"),
      &registry::cpu_isa_backend("avx2"),
      &registry::cpu_isa_backend("avx512"),
      &registry::cuda_backend(/*fast=*/false),
      &registry::cuda_backend(/*fast=*/true),
  };
  return all;
}

}  // namespace turboquant
