// The few fp32 primitives the arithmetic contract (docs/ARITHMETIC.md) is built
// from, each correctly rounded (round-to-nearest-even) on host and device:
// bit casts, fused multiply-add, floor, sqrt and division. Host code must be
// compiled with -ffp-contract=off so that a*b+c is never fused behind our back;
// device code uses the explicit _rn intrinsics, which nvcc never contracts.
#pragma once

#include "turboquant/core/hd.hpp"

#if !TQ_ON_DEVICE
#include <bit>
#include <cmath>
#endif

// Each primitive is one CUDA intrinsic on the device and one standard
// expression on the host.
#if TQ_ON_DEVICE
#define TQ_DEVICE_OR_HOST(device, host) device
#else
#define TQ_DEVICE_OR_HOST(device, host) host
#endif

namespace turboquant::core {

TQ_HD std::uint32_t float_bits(float x) {
  return TQ_DEVICE_OR_HOST(__float_as_uint(x), std::bit_cast<std::uint32_t>(x));
}
TQ_HD float bits_float(std::uint32_t u) { return TQ_DEVICE_OR_HOST(__uint_as_float(u), std::bit_cast<float>(u)); }

// a * b + c with a single rounding.
TQ_HD float fma_rn(float a, float b, float c) { return TQ_DEVICE_OR_HOST(__fmaf_rn(a, b, c), std::fma(a, b, c)); }
TQ_HD float add_rn(float a, float b) { return TQ_DEVICE_OR_HOST(__fadd_rn(a, b), a + b); }
TQ_HD float sub_rn(float a, float b) { return TQ_DEVICE_OR_HOST(__fsub_rn(a, b), a - b); }
TQ_HD float mul_rn(float a, float b) { return TQ_DEVICE_OR_HOST(__fmul_rn(a, b), a * b); }
TQ_HD float div_rn(float a, float b) { return TQ_DEVICE_OR_HOST(__fdiv_rn(a, b), a / b); }
TQ_HD float sqrt_rn(float a) { return TQ_DEVICE_OR_HOST(__fsqrt_rn(a), std::sqrt(a)); }
TQ_HD float floor_f(float a) { return TQ_DEVICE_OR_HOST(floorf(a), std::floor(a)); }

// div_rn(a, b) for many dividends over one divisor, from y = div_rn(1, b):
// the same bits as div_rn wherever both operands are in range (b > 0) (checked by the
// two predicates below; elsewhere call div_rn). q0 = a*y is within two ulp of
// a/b; one correction makes it faithful, and the second rounds it correctly
// (Markstein: y correctly rounded, q faithful, the residual a - b*q exact
// because nothing underflows in range). The residual is formed as -(b*q - a),
// so a zero dividend keeps its sign. GPU encoders use it to replace a full
// division per element by four fused multiply-adds and a multiply.
TQ_HD float div_rn_by_reciprocal(float a, float b, float y) {
  float q = mul_rn(a, y);
  float r = -fma_rn(b, q, -a);
  q = fma_rn(r, y, q);
  r = -fma_rn(b, q, -a);
  return fma_rn(r, y, q);
}

inline constexpr float kReciprocalDivisorMin = 0x1p-40f;
inline constexpr float kReciprocalDivisorMax = 0x1p40f;
inline constexpr float kReciprocalDividendMin = 0x1p-78f;  // nonzero dividends
inline constexpr float kReciprocalDividendMax = 0x1p80f;

// Positive divisors only: with b < 0 a zero dividend would lose its sign.
TQ_HD bool reciprocal_divisor_in_range(float b) {
  return b >= kReciprocalDivisorMin && b <= kReciprocalDivisorMax;  // false for NaN
}

TQ_HD bool reciprocal_dividend_in_range(float a) {
  const float m = a < 0.0f ? -a : a;
  return a == 0.0f || (m >= kReciprocalDividendMin && m <= kReciprocalDividendMax);
}

// max(a, b) as one comparison: b if b > a, else a. Defined this way (not as
// fmaxf) so that NaN handling is the same on every backend; SIMD code matches it
// with max_ps(b, a), which returns its second operand when unordered.
TQ_HD float max_f(float a, float b) { return (b > a) ? b : a; }

TQ_HD bool is_finite(float x) { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

inline constexpr float kInf = __builtin_huge_valf();

// x >> shift (1 <= shift <= 31), rounded to nearest, ties to even: how narrow
// formats round a significand into their subnormal range.
TQ_HD constexpr std::uint32_t shift_right_rne(std::uint32_t x, std::uint32_t shift) {
  const std::uint32_t kept = x >> shift;
  const std::uint32_t rest = x & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

}  // namespace turboquant::core
