// Element types of queries, keys, values and outputs (defined in core, for
// host and device), and the buffers that hold them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "turboquant/core/dtype.hpp"

namespace turboquant {

using core::DType;
using core::dtype_name;
using core::dtype_size;

// A non-owning read-only buffer of `bytes` bytes. Shapes come from the call's
// other arguments; validation checks that `bytes` covers them.
struct ConstBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
};
struct MutableBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace turboquant
