// How far a store's decision lies from its boundary, computed exactly (in
// double): what tells a one-step code flip of another producer's store (vLLM's
// approximate fp32 division, its dense cuBLAS rotation) from a wrong code. The
// criterion is docs/ARITHMETIC.md §4a; tq validate --cache applies it.
#pragma once

#include "turboquant/core/quantize.hpp"
#include "turboquant/core/rotation.hpp"

namespace turboquant::core {

// A one-step code flip is explained when the exact quantity lies within this
// many fp32 ulps of the boundary between the two codes (ARITHMETIC.md §4a).
inline constexpr double kBoundaryFlipUlps = 4.0;

// The spacing of binary32 numbers in the binade of |x| (its ulp; 2^-149 for
// subnormals and zero). |x| is rounded to fp32 first.
TQ_HD double fp32_ulp(double x) {
  const float a = static_cast<float>(x < 0 ? -x : x);
  const std::uint32_t e = (float_bits(a) >> 23) & 0xffu;  // biased exponent; ulp = 2^(e - 150)
  if (e == 0) return static_cast<double>(bits_float(1u));
  if (e < 24) return static_cast<double>(bits_float(1u << (e - 1)));  // a subnormal power of two
  return static_cast<double>(bits_float((e - 23) << 23));
}

TQ_HD double sqrt_d(double x) { return TQ_DEVICE_OR_HOST(::sqrt(x), std::sqrt(x)); }

// Value codes: the exact argument of the truncation, (v - zero) / scale + 0.5
// for the store's fp32 zero and scale (value_params). The code steps from c to
// c + 1 where it crosses c + 1.
TQ_HD double exact_value_code_argument(float v, const ValueParams& p) {
  return (static_cast<double>(v) - static_cast<double>(p.zero)) / static_cast<double>(p.scale) + 0.5;
}

// Its distance to the boundary between codes `lower` and lower + 1, in ulps of
// fp32 at lower + 1 (the binade above the boundary, where fl(q + 0.5) rounds).
TQ_HD double value_boundary_ulps(float v, const ValueParams& p, int lower) {
  const double boundary = lower + 1.0;
  const double d = exact_value_code_argument(v, p) - boundary;
  return (d < 0 ? -d : d) / fp32_ulp(boundary);
}

// Lloyd-Max keys: the exact rotated direction y = (k / (||k|| + 1e-8)) @ PiT
// in double, y[dims]. Hadamard (r.pit null): the exact H / sqrt(D), the same
// butterflies as fwht in double; dense: the caller's fp32 PiT entries.
TQ_HD void exact_rotated_direction(const Rotation& r, const float* k, int dims, double* y) {
  double sum_sq = 0;
  for (int d = 0; d < dims; ++d) sum_sq += static_cast<double>(k[d]) * k[d];
  const double denom = sqrt_d(sum_sq) + static_cast<double>(kNormEpsilon);
  if (r.pit == nullptr) {
    for (int d = 0; d < dims; ++d) y[d] = k[d];
    for (int h = 1; h < dims; h <<= 1) {
      for (int j = 0; j < dims; ++j) {
        if (j & h) continue;
        const double a = y[j], b = y[j + h];
        y[j] = a + b;
        y[j + h] = a - b;
      }
    }
    const double s = sqrt_d(static_cast<double>(dims)) * denom;
    for (int d = 0; d < dims; ++d) y[d] /= s;
    return;
  }
  for (int j = 0; j < dims; ++j) {
    double s = 0;
    for (int i = 0; i < dims; ++i) s += static_cast<double>(k[i]) * r.pit[static_cast<std::int64_t>(i) * dims + j];
    y[j] = s / denom;
  }
}

// The distance of an exact rotated coordinate y to a midpoint, in ulps of fp32
// at max(|midpoint|, 1/sqrt(D)): a rotated coordinate of a unit vector is of
// size 1/sqrt(D), and a rotation's rounding error scales with the coordinates
// it sums, not with y (4-bit codebooks have a midpoint at 0).
TQ_HD double key_boundary_ulps(double y, float midpoint, int dims) {
  const double m = midpoint < 0 ? -static_cast<double>(midpoint) : static_cast<double>(midpoint);
  const double typical = 1.0 / sqrt_d(static_cast<double>(dims));
  const double d = y - static_cast<double>(midpoint);
  return (d < 0 ? -d : d) / fp32_ulp(m > typical ? m : typical);
}

// fp16 fields: how many representable binary16 values lie between two finite
// bit patterns (0 for equal bits and for +0 / -0); -1 when either is inf or NaN.
TQ_HD int fp16_steps_apart(std::uint16_t a, std::uint16_t b) {
  if ((a & 0x7c00u) == 0x7c00u || (b & 0x7c00u) == 0x7c00u) return a == b ? 0 : -1;
  const int ia = (a & 0x8000u) ? -static_cast<int>(a & 0x7fffu) : static_cast<int>(a & 0x7fffu);
  const int ib = (b & 0x8000u) ? -static_cast<int>(b & 0x7fffu) : static_cast<int>(b & 0x7fffu);
  return ia > ib ? ia - ib : ib - ia;
}

}  // namespace turboquant::core
