// FP8 e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no inf,
// 0x7f/0xff are NaN; largest finite 448), as vLLM stores keys for
// turboquant_k8v4 on sm_89+ (facts §d): round to nearest even, saturating to
// +-448 (Triton's in-kernel cast saturates where torch's .to() gives NaN).
#pragma once

#include "turboquant/core/float_ops.hpp"

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

}  // namespace turboquant::core
