// Element types of queries, keys, values and outputs. In core (host and
// device) so that every backend loads and stores activations with one
// definition; the public names are turboquant::DType etc. (turboquant/dtype.hpp).
#pragma once

#include <cstddef>

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

enum class DType : std::uint8_t { kFloat32, kFloat16, kBFloat16 };

TQ_HD constexpr std::size_t dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }
inline constexpr const char* dtype_name(DType t) {
  return t == DType::kFloat32 ? "float32" : (t == DType::kFloat16 ? "float16" : "bfloat16");
}

}  // namespace turboquant::core
