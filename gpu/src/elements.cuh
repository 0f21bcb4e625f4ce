// Device-side element access for the activation dtypes: the core definitions
// (core/elements.hpp, host and device) under the kernels' names.
#pragma once

#include "turboquant/core/elements.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::cuda::detail {

using core::load_element;
using core::store_element;

}  // namespace turboquant::cuda::detail
