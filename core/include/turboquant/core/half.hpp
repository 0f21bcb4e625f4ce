// IEEE binary16 and bfloat16 <-> fp32, bit-exact and constexpr, without
// cuda_fp16.h so that the format layer stays dependency-free.
// Narrowing rounds to nearest, ties to even (as torch, Triton and CUDA do).
#pragma once

#include "turboquant/core/float_ops.hpp"

namespace turboquant::core {

inline constexpr float kFp16Max = 65504.0f;

TQ_HD float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: value = mant * 2^-24, exactly representable in fp32.
  std::uint32_t e = 113;  // exponent of 2^-14 is 127-14 = 113
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

TQ_HD std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (NaN stays quiet NaN)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs >= 0x38800000u) {  // normal fp16 range (>= 2^-14)
    const std::uint32_t mant_shifted = abs - 0x38000000u;  // rebias exponent 127 -> 15
    const std::uint32_t rounded = mant_shifted + 0xfffu + ((mant_shifted >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25: rounds to zero
  // Subnormal fp16 (multiples of 2^-24): |f| / 2^-24 = significand >> (126 - e),
  // rounded to nearest even (a carry into 0x400 lands on the smallest normal).
  const std::uint32_t e = abs >> 23;  // 102..112 here, so shift is 14..24
  const std::uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(sign | shift_right_rne(significand, 126u - e));
}

// fp16 metadata are clamped to the finite range before narrowing, so that a
// huge norm, scale or zero point is stored as +-65504, never inf (gh-53334).
// clamp_meta is that clamp on its own (NaN passes), for backends that narrow
// with their own conversion instructions.
TQ_HD float clamp_meta(float f) {
  if (f > kFp16Max) f = kFp16Max;
  if (f < -kFp16Max) f = -kFp16Max;
  return f;
}
TQ_HD std::uint16_t float_to_fp16_clamped(float f) { return float_to_fp16(clamp_meta(f)); }

TQ_HD float bf16_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

TQ_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

}  // namespace turboquant::core
