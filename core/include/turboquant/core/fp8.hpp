// The two FP8 key encodings of turboquant_k8v4 (core::Fp8Format, facts §d):
// - e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no inf,
//   0x7f/0xff are NaN; largest finite 448), what vLLM stores on sm_89+: round
//   to nearest even, saturating to +-448 (Triton's in-kernel cast saturates
//   where torch's .to() gives NaN).
// - e4b15 (exponent bias 15, 3 mantissa bits, exponent 0 subnormal, no inf or
//   NaN), what vLLM stores below sm_89. Its magnitude bits are the top 7 bits
//   of an fp16 magnitude, so a byte widens to fp16 by a shift.
#pragma once

#include "turboquant/core/format.hpp"
#include "turboquant/core/half.hpp"

namespace turboquant::core {

inline constexpr float kFp8Max = 448.0f;

TQ_HD float fp8_e4m3_to_float(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t exp = (v >> 3) & 0xfu;
  const std::uint32_t mant = v & 0x7u;
  if (exp == 0xf && mant == 0x7) return bits_float(sign | 0x7fc00000u);  // NaN
  if (exp != 0) return bits_float(sign | ((exp + 120u) << 23) | (mant << 20));
  // Subnormal: mant * 2^-9, exact in fp32.
  const float magnitude = static_cast<float>(mant) * 0.001953125f;
  return (v & 0x80u) ? -magnitude : magnitude;
}

TQ_HD std::uint8_t float_to_fp8_e4m3(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);  // NaN
  if (abs >= 0x43e00000u) return static_cast<std::uint8_t>(sign | 0x7eu);  // >= 448 (and inf): saturate
  if (abs >= 0x3c800000u) {  // >= 2^-6: normal e4m3
    const std::uint32_t rebiased = abs - 0x3c000000u;  // exponent bias 127 -> 7
    const std::uint32_t rounded = rebiased + 0x7ffffu + ((rebiased >> 20) & 1u);
    const std::uint32_t code = rounded >> 20;
    return static_cast<std::uint8_t>(sign | (code > 0x7eu ? 0x7eu : code));
  }
  if (abs < 0x3a000000u) return sign;  // < 2^-11: far below half the smallest subnormal
  // Subnormal e4m3: multiples of 2^-9. |f| = significand * 2^(e - 150), so
  // |f| / 2^-9 = significand >> (141 - e); round that to nearest even (a carry
  // into 8 lands exactly on the smallest normal, 2^-6).
  const std::uint32_t e = abs >> 23;  // 116..120 here, so shift is 21..25
  const std::uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint8_t>(sign | shift_right_rne(significand, 141u - e));
}

inline constexpr float kFp8E4b15Max = 1.75f;  // the largest magnitude the store writes (0x7e)

// The fp16 of an e4b15 byte (exact): sign | magnitude << 7. 0x7f/0xff, which
// the store never writes, read as +-1.875 (Triton's conversion).
TQ_HD constexpr std::uint16_t fp8_e4b15_to_fp16_bits(std::uint8_t v) {
  return static_cast<std::uint16_t>((std::uint16_t{v} & 0x80u) << 8 | (std::uint16_t{v} & 0x7fu) << 7);
}
TQ_HD float fp8_e4b15_to_float(std::uint8_t v) { return fp16_to_float(fp8_e4b15_to_fp16_bits(v)); }

// vLLM's store (measured on a06, 100% of bytes): the fp32 key narrowed to fp16
// rounding toward zero, its magnitude clamped to 1.75 (fp16 0x3f00), then
// rounded half away from zero to 3 mantissa bits. NaN and inf store +-1.75.
TQ_HD std::uint8_t float_to_fp8_e4b15(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  const std::uint32_t abs = x & 0x7fffffffu;
  std::uint32_t half_magnitude;                      // fp16 magnitude bits, rounded toward zero
  if (abs >= 0x3fe00000u) {                          // >= 1.75, inf, NaN
    half_magnitude = 0x3f00u;
  } else if (abs >= 0x38800000u) {                   // fp16 normal (>= 2^-14)
    half_magnitude = (abs - 0x38000000u) >> 13;      // rebias 127 -> 15, truncate
  } else if ((abs >> 23) >= 103u) {                  // fp16 subnormal: floor(|f| / 2^-24)
    half_magnitude = ((abs & 0x7fffffu) | 0x800000u) >> (126u - (abs >> 23));
  } else {
    half_magnitude = 0;
  }
  return static_cast<std::uint8_t>(sign | ((half_magnitude + 0x40u) >> 7));
}

// The format's FP8 encoding.
TQ_HD float fp8_to_float(Fp8Format f, std::uint8_t v) {
  return f == Fp8Format::kE4b15 ? fp8_e4b15_to_float(v) : fp8_e4m3_to_float(v);
}
TQ_HD std::uint8_t float_to_fp8(Fp8Format f, float x) {
  return f == Fp8Format::kE4b15 ? float_to_fp8_e4b15(x) : float_to_fp8_e4m3(x);
}

}  // namespace turboquant::core
