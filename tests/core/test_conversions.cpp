// fp16, bf16 and FP8 (e4m3, e4b15) conversions, exhaustively where the domain
// allows, against independent oracles (the CPU's F16C instructions, exact
// rationals, a double-precision model of vLLM's e4b15 store).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

#include "turboquant/core/fp8.hpp"
#include "turboquant/core/half.hpp"
#include "turboquant/core/pack.hpp"

namespace turboquant::core {
namespace {

__attribute__((target("f16c"))) std::uint16_t hw_float_to_half(float f) {
  return static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hw_half_to_float(std::uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
bool have_f16c() { return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"); }

TEST(Fp16, AllPatternsWidenExactlyAndRoundTrip) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_float(static_cast<std::uint16_t>(h));
    const bool nan = ((h & 0x7c00u) == 0x7c00u) && (h & 0x3ffu);
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      continue;
    }
    EXPECT_EQ(float_to_fp16(f), h) << "pattern " << h;
    if (have_f16c()) {
      EXPECT_EQ(float_bits(f), float_bits(hw_half_to_float(static_cast<std::uint16_t>(h)))) << h;
    }
  }
}

TEST(Fp16, NarrowingMatchesHardwareRoundToNearestEven) {
  if (!have_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  // Every float whose value lies between fp16 neighbours, ties included: sweep
  // the 2^32 space with a stride, plus all halfway points exactly.
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) {
    const float f = bits_float(static_cast<std::uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_fp16(f), hw_float_to_half(f)) << std::hexfloat << f;
  }
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // midpoints between consecutive positive halves
    const float lo = fp16_to_float(static_cast<std::uint16_t>(h));
    const float hi = fp16_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    ASSERT_EQ(float_to_fp16(mid), hw_float_to_half(mid)) << h;
    ASSERT_EQ(float_to_fp16(-mid), hw_float_to_half(-mid)) << h;
  }
}

TEST(Fp16, ClampedNarrowingNeverOverflows) {
  EXPECT_EQ(float_to_fp16_clamped(1e6f), 0x7bffu);
  EXPECT_EQ(float_to_fp16_clamped(-125000.0f), 0xfbffu);
  EXPECT_EQ(float_to_fp16_clamped(65519.0f), 0x7bffu);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00u);  // unclamped: rounds to inf
  EXPECT_EQ(float_to_fp16_clamped(1.0f), 0x3c00u);
}

TEST(Bf16, RoundTripAndRounding) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f), b);
  }
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80u);  // tie to even (down)
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82u);  // tie to even (up)
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81u);
}

// Exact value of an e4m3fn code from its definition.
double fp8_exact(std::uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -mag : mag;
}

TEST(Fp8, AllCodesDecodeAndRoundTrip) {
  for (int v = 0; v < 256; ++v) {
    const float f = fp8_e4m3_to_float(static_cast<std::uint8_t>(v));
    if ((v & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << v;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), fp8_exact(static_cast<std::uint8_t>(v))) << v;
    const std::uint8_t back = float_to_fp8_e4m3(f);
    if (v == 0x80) {
      EXPECT_EQ(back, 0x80);  // -0 keeps its sign
    }
    else EXPECT_EQ(back, v);
  }
}

TEST(Fp8, RoundsToNearestEvenAndSaturates) {
  // Measured on the H200 with Triton's float8e4nv cast (facts §d).
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1.1875f)), 1.25f);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(3.0f / 1024)), 1.0f / 256);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1.0f / 1024)), 0.0f);
  for (float big : {460.0f, 464.0f, 480.0f, 500.0f, 1000.0f, 1e30f}) {
    EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(big)), 448.0f) << big;
    EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(-big)), -448.0f) << big;
  }
}

TEST(Fp8, NearestCodeForRandomFloats) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int i = 0; i < 200000; ++i) {
    const float f = i % 2 ? dist(rng) : dist(rng) * 1e-2f;
    const std::uint8_t c = float_to_fp8_e4m3(f);
    const double got = fp8_exact(c);
    // No other finite code is strictly closer; on a tie the chosen one is even.
    for (int v = 0; v < 256; ++v) {
      if ((v & 0x7f) == 0x7f) continue;
      const double other = fp8_exact(static_cast<std::uint8_t>(v));
      const double dg = std::fabs(got - f), d_o = std::fabs(other - f);
      ASSERT_LE(dg, d_o) << "f=" << f << " code=" << int(c) << " better=" << v;
      if (dg == d_o && got != other) {
        ASSERT_EQ(c & 1, 0) << f;
      }
    }
  }
}

// Exact value of an e4b15 code from its definition (bias 15, exponent 0
// subnormal, no inf or NaN: 0x7f is 1.875).
double e4b15_exact(std::uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  const double mag = e == 0 ? std::ldexp(m, -17) : std::ldexp(8 + m, e - 18);
  return s ? -mag : mag;
}

TEST(Fp8E4b15, AllCodesDecodeExactly) {
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<std::uint8_t>(v);
    EXPECT_EQ(static_cast<double>(fp8_e4b15_to_float(b)), e4b15_exact(b)) << v;
    EXPECT_EQ(static_cast<double>(fp8_to_float(Fp8Format::kE4b15, b)), e4b15_exact(b)) << v;
  }
  EXPECT_EQ(fp8_e4b15_to_float(0x7e), 1.75f);
  EXPECT_EQ(fp8_e4b15_to_float(0xff), -1.875f);
}

// vLLM's e4b15 store as the cases README measures it (a06, every byte): the
// fp32 key narrowed to fp16 toward zero, its magnitude clamped to 1.75, then
// rounded half away from zero to 3 mantissa bits; NaN and inf store +-1.75.
// Modelled here in double arithmetic on the value grid, not on bits.
double e4b15_store_model(float f) {
  const double a = std::fabs(static_cast<double>(f));
  if (!(a < 1.75)) return std::signbit(f) ? -1.75 : 1.75;
  const auto grid = [](double x, int mantissa_bits, int min_exp) {  // spacing of the grid at x
    const int e = x >= std::ldexp(1.0, min_exp) ? std::ilogb(x) : min_exp;
    return std::ldexp(1.0, e - mantissa_bits);
  };
  const double q16 = grid(a, 10, -14);
  const double t = std::floor(a / q16) * q16;  // fp16, toward zero
  const double q8 = grid(t, 3, -14);
  const double r = std::floor(t / q8 + 0.5) * q8;  // half away from zero
  return std::signbit(f) ? -r : r;
}

TEST(Fp8E4b15, StoreMatchesTheModelOfVllmsCast) {
  std::int64_t checked = 0;
  const auto check = [&](float f) {
    const std::uint8_t c = float_to_fp8_e4b15(f);
    ASSERT_EQ(e4b15_exact(c), e4b15_store_model(f)) << f << " -> " << int{c};
    ASSERT_EQ(c & 0x80, std::signbit(f) ? 0x80 : 0) << f;
    ASSERT_EQ(float_to_fp8(Fp8Format::kE4b15, f), c) << f;
    ++checked;
  };
  for (int h = 0; h < 65536; ++h) check(fp16_to_float(static_cast<std::uint16_t>(h)));  // every fp16 value
  std::mt19937 rng(4321);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 200000; ++i) {  // fp32 values between the fp16 ones, 2^-30 .. 2^3
    const float f = std::ldexp(mantissa(rng), static_cast<int>(rng() % 34) - 30);
    check(i % 2 ? -f : f);
  }
  for (float f : {INFINITY, -INFINITY, NAN, -NAN, 1e30f, 1.7499999f, 1.75f, 1.8125f}) check(f);
  EXPECT_EQ(float_to_fp8_e4b15(NAN), 0x7e);
  EXPECT_EQ(float_to_fp8_e4b15(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_fp8_e4b15(1.7499999f), 0x7e) << "rounds up to the clamp";
  EXPECT_GT(checked, 265000);
}

TEST(Pack, FourBitExhaustivePairs) {
  for (int a = 0; a < 16; ++a) {
    for (int b = 0; b < 16; ++b) {
      std::uint8_t codes[16] = {};
      codes[6] = static_cast<std::uint8_t>(a);
      codes[7] = static_cast<std::uint8_t>(b);
      std::uint8_t bytes[8];
      pack_codes(4, codes, 16, bytes);
      EXPECT_EQ(bytes[3], a | (b << 4));  // dim 2k low nibble, 2k+1 high
      for (int d = 0; d < 16; ++d) EXPECT_EQ(unpack_code4(bytes, d), codes[d]);
    }
  }
}

TEST(Pack, ThreeBitEveryCodeAtEveryPosition) {
  for (int pos = 0; pos < 16; ++pos) {
    for (int c = 0; c < 8; ++c) {
      std::uint8_t codes[16];
      for (int d = 0; d < 16; ++d) codes[d] = static_cast<std::uint8_t>((d * 5 + 3) & 7);
      codes[pos] = static_cast<std::uint8_t>(c);
      std::uint8_t bytes[6];
      pack_codes(3, codes, 16, bytes);
      // Group g is the little-endian 24-bit word sum code[8g+j] << 3j.
      for (int g = 0; g < 2; ++g) {
        std::uint32_t word = 0;
        for (int j = 0; j < 8; ++j) word |= std::uint32_t{codes[8 * g + j]} << (3 * j);
        EXPECT_EQ(bytes[3 * g] | (bytes[3 * g + 1] << 8) | (bytes[3 * g + 2] << 16), static_cast<int>(word));
      }
      std::uint8_t back[16];
      unpack_codes(3, bytes, 16, back);
      EXPECT_EQ(std::memcmp(back, codes, 16), 0);
    }
  }
}

TEST(Pack, ThreeBitAllBytePatternsRoundTrip) {
  // Every 24-bit group word unpacks to 8 codes that pack back to the same bytes.
  for (std::uint32_t w = 0; w < (1u << 24); ++w) {
    const std::uint8_t bytes[3] = {static_cast<std::uint8_t>(w), static_cast<std::uint8_t>(w >> 8),
                                   static_cast<std::uint8_t>(w >> 16)};
    std::uint8_t codes[8], again[3];
    unpack_codes(3, bytes, 8, codes);
    pack_codes(3, codes, 8, again);
    ASSERT_EQ(std::memcmp(bytes, again, 3), 0) << w;
  }
}

}  // namespace
}  // namespace turboquant::core
