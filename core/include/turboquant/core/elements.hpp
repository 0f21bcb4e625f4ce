// Element i of an activation tensor of type t, widened exactly to fp32, and
// fp32 narrowed to t with round-to-nearest-even (core/half.hpp): the one
// definition every backend's loads and stores use. Host code reads through
// memcpy (buffers may be unaligned); device code reads the element type
// directly (the CUDA launchers check alignment).
#pragma once

#include "turboquant/core/dtype.hpp"
#include "turboquant/core/half.hpp"

#if !TQ_ON_DEVICE
#include <cstring>
#endif

namespace turboquant::core {

TQ_HD std::uint16_t load_u16(const void* base, std::int64_t i) {
#if TQ_ON_DEVICE
  return static_cast<const std::uint16_t*>(base)[i];
#else
  std::uint16_t h;
  std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
  return h;
#endif
}

// A 16-bit element's bits (t is kFloat16 or kBFloat16) widened to fp32.
TQ_HD float widen_16(std::uint16_t h, DType t) { return t == DType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h); }

TQ_HD float load_element(const void* base, DType t, std::int64_t i) {
  if (t == DType::kFloat32) {
#if TQ_ON_DEVICE
    return static_cast<const float*>(base)[i];
#else
    float f;
    std::memcpy(&f, static_cast<const char*>(base) + 4 * i, 4);
    return f;
#endif
  }
  return widen_16(load_u16(base, i), t);
}

TQ_HD void store_element(void* base, DType t, std::int64_t i, float f) {
  if (t == DType::kFloat32) {
#if TQ_ON_DEVICE
    static_cast<float*>(base)[i] = f;
#else
    std::memcpy(static_cast<char*>(base) + 4 * i, &f, 4);
#endif
    return;
  }
  const std::uint16_t h = t == DType::kFloat16 ? float_to_fp16(f) : float_to_bf16(f);
#if TQ_ON_DEVICE
  static_cast<std::uint16_t*>(base)[i] = h;
#else
  std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
#endif
}

TQ_HD void load_row(const void* base, DType t, std::int64_t first, int count, float* out) {
  for (int i = 0; i < count; ++i) out[i] = load_element(base, t, first + i);
}

}  // namespace turboquant::core
