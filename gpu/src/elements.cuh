// Device-side element access for the activation dtypes: the same widening and
// round-to-nearest-even narrowing as turboquant/detail/elements.hpp (both call
// core/half.hpp), without memcpy.
#pragma once

#include <cstdint>

#include "turboquant/core/half.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::cuda::detail {

__device__ __forceinline__ float load_element(const void* base, DType t, std::int64_t i) {
  if (t == DType::kFloat32) return static_cast<const float*>(base)[i];
  const std::uint16_t h = static_cast<const std::uint16_t*>(base)[i];
  return t == DType::kFloat16 ? core::fp16_to_float(h) : core::bf16_to_float(h);
}

__device__ __forceinline__ void store_element(void* base, DType t, std::int64_t i, float f) {
  if (t == DType::kFloat32) {
    static_cast<float*>(base)[i] = f;
    return;
  }
  static_cast<std::uint16_t*>(base)[i] = t == DType::kFloat16 ? core::float_to_fp16(f) : core::float_to_bf16(f);
}

}  // namespace turboquant::cuda::detail
