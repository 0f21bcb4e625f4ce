// Host-side element access for the three activation dtypes: the core
// definitions (core/elements.hpp) under their internal turboquant::detail names.
#pragma once

#include "turboquant/core/elements.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::detail {

using core::load_element;
using core::load_row;
using core::store_element;

}  // namespace turboquant::detail
