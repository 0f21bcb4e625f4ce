// div_rn_by_reciprocal gives div_rn's bits over its whole stated range: random
// operands spread over every exponent of the range, and the cases that are hard
// for division (quotients next to a rounding midpoint, divisors with all-ones
// significands, powers of two, signed zeros).
#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <random>

#include "turboquant/core/float_ops.hpp"

namespace {

using namespace turboquant::core;

// A float with a random significand and a uniform exponent in [lo, hi].
float random_float(std::mt19937_64& rng, int lo, int hi, bool positive = false) {
  std::uniform_int_distribution<int> exp(lo, hi);
  const std::uint32_t mantissa = static_cast<std::uint32_t>(rng()) & 0x7fffffu;
  const std::uint32_t sign = positive ? 0u : static_cast<std::uint32_t>(rng() & 1u) << 31;
  return bits_float(sign | (static_cast<std::uint32_t>(exp(rng) + 127) << 23) | mantissa);
}

int mismatches(float a, float b) {
  if (!reciprocal_divisor_in_range(b) || !reciprocal_dividend_in_range(a)) return 0;
  const float want = div_rn(a, b);
  const float got = div_rn_by_reciprocal(a, b, div_rn(1.0f, b));
  return float_bits(want) == float_bits(got) ? 0 : 1;
}

TEST(ReciprocalDivision, EqualsDivRnOnRandomOperandsOverTheRange) {
  std::mt19937_64 rng(7);
  int bad = 0;
  for (int i = 0; i < 4'000'000; ++i) bad += mismatches(random_float(rng, -78, 80), random_float(rng, -40, 40, true));
  // Encoder-like operands: |a| <= b (a key element over its norm, a value offset over its scale).
  for (int i = 0; i < 4'000'000; ++i) {
    const float b = random_float(rng, -30, 20, true);
    const float a = div_rn(random_float(rng, -30, 0), 1.0f) * b;
    bad += mismatches(a, b);
  }
  EXPECT_EQ(bad, 0);
}

TEST(ReciprocalDivision, EqualsDivRnNextToRoundingMidpoints) {
  // a = b * (q + half an ulp of q), rounded: the quotient sits next to a tie.
  std::mt19937_64 rng(11);
  int bad = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const float b = random_float(rng, -40, 40, true);
    const float q = random_float(rng, -30, 30);
    const double mid = static_cast<double>(q) + std::ldexp(1.0, std::ilogb(q) - 24);
    const float a = static_cast<float>(mid * b);
    for (std::uint32_t d = 0; d < 3; ++d) bad += mismatches(bits_float(float_bits(a) + d - 1), b);
  }
  EXPECT_EQ(bad, 0);
}

TEST(ReciprocalDivision, EqualsDivRnOnStructuredDivisors) {
  std::mt19937_64 rng(13);
  int bad = 0;
  for (int e = -40; e < 40; ++e) {
    for (std::uint32_t mantissa : {0u, 1u, 0x7fffffu, 0x7ffffeu, 0x400000u, 0x3fffffu}) {
      const float b = bits_float((static_cast<std::uint32_t>(e + 127) << 23) | mantissa);
      for (int i = 0; i < 20'000; ++i) bad += mismatches(random_float(rng, -78, 80), b);
      for (float a : {0.0f, -0.0f, 1.0f, -1.0f, b, -b, 0x1p-78f, 0x1p80f}) bad += mismatches(a, b);
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(ReciprocalDivision, ZeroDividendsKeepTheirSign) {
  for (float b : {1.0f, 3.0f, 0x1p-40f, 0x1p40f, 7.0f}) {
    const float y = div_rn(1.0f, b);
    EXPECT_EQ(float_bits(div_rn_by_reciprocal(0.0f, b, y)), float_bits(div_rn(0.0f, b)));
    EXPECT_EQ(float_bits(div_rn_by_reciprocal(-0.0f, b, y)), float_bits(div_rn(-0.0f, b)));
  }
}

TEST(ReciprocalDivision, RangeChecksRejectWhatTheProofDoesNotCover) {
  EXPECT_FALSE(reciprocal_divisor_in_range(0x1p-41f));
  EXPECT_FALSE(reciprocal_divisor_in_range(0x1p41f));
  EXPECT_FALSE(reciprocal_divisor_in_range(kInf));
  EXPECT_FALSE(reciprocal_divisor_in_range(bits_float(0x7fc00000u)));
  EXPECT_FALSE(reciprocal_divisor_in_range(-1.0f));
  EXPECT_TRUE(reciprocal_divisor_in_range(1.0f));
  EXPECT_FALSE(reciprocal_dividend_in_range(0x1p-79f));
  EXPECT_FALSE(reciprocal_dividend_in_range(0x1p81f));
  EXPECT_FALSE(reciprocal_dividend_in_range(bits_float(0x7fc00000u)));
  EXPECT_FALSE(reciprocal_dividend_in_range(bits_float(1u)));  // subnormal
  EXPECT_TRUE(reciprocal_dividend_in_range(-0.0f));
}

}  // namespace
