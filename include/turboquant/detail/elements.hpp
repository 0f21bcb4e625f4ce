// Host-side element access for the three activation dtypes (exact widening,
// round-to-nearest-even narrowing). Internal; used by the CPU backends.
#pragma once

#include <cstdint>
#include <cstring>

#include "turboquant/core/half.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::detail {

inline float load_element(const void* base, DType t, std::int64_t i) {
  if (t == DType::kFloat32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(base) + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
  return t == DType::kFloat16 ? core::fp16_to_float(h) : core::bf16_to_float(h);
}

inline void store_element(void* base, DType t, std::int64_t i, float f) {
  if (t == DType::kFloat32) {
    std::memcpy(static_cast<char*>(base) + 4 * i, &f, 4);
    return;
  }
  const std::uint16_t h = t == DType::kFloat16 ? core::float_to_fp16(f) : core::float_to_bf16(f);
  std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
}

inline void load_row(const void* base, DType t, std::int64_t first, int count, float* out) {
  for (int i = 0; i < count; ++i) out[i] = load_element(base, t, first + i);
}

}  // namespace turboquant::detail
