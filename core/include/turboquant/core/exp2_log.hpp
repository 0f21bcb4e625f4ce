// The contract's own exp2 and log2 (docs/ARITHMETIC.md §exp2/log2). libm's and
// CUDA's versions differ in the last bit; these are built only from correctly
// rounded fp32 operations, so every backend reproduces them bit for bit.
// Accuracy: exp2 within ~1 ulp on (-126, 128); log2 within ~2e-7 relative.
#pragma once

#include "turboquant/core/float_ops.hpp"

namespace turboquant::core {

inline constexpr float kLog2e = 0x1.715476p+0f;  // log2(e) rounded to fp32
inline constexpr float kLn2 = 0x1.62e430p-1f;    // ln(2) rounded to fp32

// 2^f for f in [0, 1): a degree-6 least-squares fit on Chebyshev nodes, rounded
// to fp32, evaluated by Horner's rule with fused multiply-adds from the top.
// (Scalars, not an array: constexpr arrays are not visible in CUDA device code.)
TQ_HD float exp2_poly(float f) {
  float p = 0x1.c6e292p-13f;
  p = fma_rn(p, f, 0x1.46301cp-10f);
  p = fma_rn(p, f, 0x1.3d24eap-7f);
  p = fma_rn(p, f, 0x1.c68562p-5f);
  p = fma_rn(p, f, 0x1.ebfd9ap-3f);
  p = fma_rn(p, f, 0x1.62e42ap-1f);
  return fma_rn(p, f, 1.0f);
}

// log2((1+s)/(1-s)) / s as a cubic in z = s^2, for |s| <= 3 - 2*sqrt(2).
TQ_HD float log2_poly(float z) {
  float p = 0x1.ba1838p-2f;
  p = fma_rn(p, z, 0x1.274720p-1f);
  p = fma_rn(p, z, 0x1.ec70e6p-1f);
  return fma_rn(p, z, 0x1.715476p+1f);
}

// exp2(x): x <= -126 (and -inf) gives +0, NaN propagates, x >= 128 gives inf.
// Otherwise x = n + f with n = floor(x), f in [0, 1); 2^f by Horner with fused
// multiply-adds (exp2_poly); times 2^n built from bits.
TQ_HD float exp2_tq(float x) {
  if (x != x) return x;
  if (!(x > -126.0f)) return 0.0f;
  if (x >= 128.0f) return kInf;
  const float n = floor_f(x);
  const float f = sub_rn(x, n);  // exact: x and n are within 1 of each other
  const float p = exp2_poly(f);
  const int e = static_cast<int>(n);  // -126 .. 127: 2^e is a normal float
  return mul_rn(p, bits_float(static_cast<std::uint32_t>(e + 127) << 23));
}

// log2(x): x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log2(m) = s * P(s^2)
// with s = (m - 1) / (m + 1). 0 gives -inf, negatives and NaN give NaN, inf gives inf.
TQ_HD float log2_tq(float x) {
  if (x != x || x < 0.0f) return bits_float(0x7fc00000u);
  if (x == 0.0f) return -kInf;
  if (x == kInf) return kInf;
  std::uint32_t bits = float_bits(x);
  int e = 0;
  if (bits < 0x00800000u) {  // subnormal: scale into the normal range first
    bits = float_bits(mul_rn(x, 0x1p+23f));
    e = -23;
  }
  e += static_cast<int>(bits >> 23) - 127;
  float m = bits_float((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 0x1.6a09e6p+0f) {  // > sqrt(2): use m/2 in [sqrt(1/2), 1) instead
    m = mul_rn(m, 0.5f);
    e += 1;
  }
  const float s = div_rn(sub_rn(m, 1.0f), add_rn(m, 1.0f));
  const float z = mul_rn(s, s);
  return add_rn(static_cast<float>(e), mul_rn(s, log2_poly(z)));
}

}  // namespace turboquant::core
