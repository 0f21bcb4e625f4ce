// The finishing steps of the formulas (quantize.hpp, half.hpp, softmax.hpp)
// and the core element access: each equals, bit for bit, the expression it
// replaced in the backends, on random inputs and the edge cases (zeros of both
// signs, subnormals, the fp16 limits, infinities, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "turboquant/core/elements.hpp"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/softmax.hpp"

namespace turboquant::core {
namespace {

std::uint32_t bits(float x) { return float_bits(x); }

// Random floats of every magnitude and sign, then the edge cases.
std::vector<float> inputs() {
  std::vector<float> v = {0.0f,   -0.0f,  1.0f,         -1.0f,       0x1p-149f, -0x1p-149f, 0x1p-126f, 65504.0f,
                          -65504.0f, 65520.0f, -65520.0f, 1e-8f,  1.0000001e-8f, 9.999999e-9f, 1e30f,
                          -1e30f, kInf,   -kInf,        std::nanf(""), -std::nanf(""), 3.0e38f};
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> any;
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < 20000; ++i) v.push_back(bits_float(any(rng)));
  for (int i = 0; i < 20000; ++i) v.push_back(nd(rng));
  return v;
}

TEST(FinishingSteps, KeyDenominatorIsSqrtThenEpsilon) {
  for (const float x : inputs()) {
    const float s = std::fabs(x);  // a sum of squares is >= 0 (or NaN, inf)
    const KeyDenominator kd = key_denominator(s);
    const float norm = std::sqrt(s);  // the SIMD encoder's expression
    ASSERT_EQ(bits(kd.norm), bits(norm)) << s;
    ASSERT_EQ(bits(kd.denom), bits(norm + kNormEpsilon)) << s;
  }
}

TEST(FinishingSteps, StoredKeyNormEqualsTheComposedExpression) {
  const std::vector<float> in = inputs();
  for (std::size_t i = 0; i + 1 < in.size(); ++i) {
    const float norm = std::fabs(in[i]);
    const float sum_sq = std::fabs(in[i + 1]);
    const float composed = norm * (1.0f / std::sqrt(sum_sq + kCorrectionEpsilon));
    ASSERT_EQ(bits(stored_key_norm(norm, sum_sq, true)), bits(composed)) << norm << " " << sum_sq;
    ASSERT_EQ(bits(stored_key_norm(norm, sum_sq, false)), bits(norm));
  }
  // The vector form reduces with dot16 first.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> c(128);
  for (float& x : c) x = nd(rng);
  EXPECT_EQ(bits(stored_key_norm(2.5f, c.data(), 128, true)), bits(stored_key_norm(2.5f, dot16(c.data(), c.data(), 128), true)));
  EXPECT_EQ(bits(stored_key_norm(2.5f, c.data(), 128, false)), bits(2.5f));
}

TEST(FinishingSteps, ValueScaleEqualsTheComposedExpression) {
  const std::vector<float> in = inputs();
  for (const int b : {3, 4}) {
    for (std::size_t i = 0; i + 1 < in.size(); ++i) {
      const float mn = in[i] < in[i + 1] ? in[i] : in[i + 1];
      const float mx = in[i] < in[i + 1] ? in[i + 1] : in[i];
      float scale = (mx - mn) / static_cast<float>((1 << b) - 1);
      if (!(scale > kMinValueScale)) scale = kMinValueScale;
      ASSERT_EQ(bits(value_scale(mn, mx, b)), bits(scale)) << mn << " " << mx;
    }
  }
  EXPECT_EQ(value_scale(1.0f, 1.0f, 4), kMinValueScale);
  EXPECT_EQ(value_scale(std::nanf(""), 1.0f, 4), kMinValueScale);
}

TEST(FinishingSteps, ValueRangeIsTheSequentialScan) {
  std::mt19937 rng(5);
  const std::vector<float> in = inputs();
  std::uniform_int_distribution<std::size_t> pick(0, in.size() - 1);
  for (int trial = 0; trial < 2000; ++trial) {
    float v[64];
    for (float& x : v) x = in[pick(rng)];
    float mn = v[0], mx = v[0];
    for (int d = 1; d < 64; ++d) {
      if (v[d] < mn) mn = v[d];
      if (v[d] > mx) mx = v[d];
    }
    const ValueRange r = value_range(v, 64);
    ASSERT_EQ(bits(r.min), bits(mn));
    ASSERT_EQ(bits(r.max), bits(mx));
    const ValueParams p = value_params(v, 64, 4);
    ASSERT_EQ(bits(p.zero), bits(mn));
    ASSERT_EQ(bits(p.scale), bits(value_scale(mn, mx, 4)));
  }
}

TEST(FinishingSteps, ClampMetaIsTheFp16Clamp) {
  for (const float x : inputs()) {
    float c = x;
    if (c > kFp16Max) c = kFp16Max;
    if (c < -kFp16Max) c = -kFp16Max;
    ASSERT_EQ(bits(clamp_meta(x)), bits(c)) << x;
    ASSERT_EQ(float_to_fp16_clamped(x), float_to_fp16(c)) << x;
  }
}

TEST(FinishingSteps, SoftmaxStepsEqualTheFoldsExpressions) {
  const std::vector<float> in = inputs();
  EXPECT_EQ(bits(softmax_reference(-kInf)), bits(0.0f));
  for (std::size_t i = 0; i + 1 < in.size(); ++i) {
    const float m = in[i];
    const float ref = (m == -kInf) ? 0.0f : m;
    ASSERT_EQ(bits(softmax_reference(m)), bits(ref)) << m;
    const float x = in[i + 1];
    ASSERT_EQ(bits(softmax_exponent(x, ref)), bits(x - ref));
    ASSERT_EQ(bits(softmax_weight(x, ref)), bits(exp2_tq(x - ref)));
    ASSERT_EQ(bits(merge_exponent(x, m)), bits(x - m));
    ASSERT_EQ(bits(merge_weight(x, m)), bits(exp2_tq(x - m)));
    const float sum = std::fabs(x);
    if (m != -kInf) {
      ASSERT_EQ(bits(lse_of_log2(m, log2_tq(sum))), bits((m + log2_tq(sum)) * kLn2));
      ASSERT_EQ(bits(finalize_lse(sum, m)), bits(lse_of_log2(m, log2_tq(sum))));
    }
  }
  EXPECT_EQ(finalize_lse(1.0f, -kInf), -kInf);
}

TEST(Elements, LoadAndStoreEveryDtype) {
  const std::vector<float> in = inputs();
  for (const DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    std::vector<unsigned char> buf(in.size() * dtype_size(t) + 1);
    void* odd = buf.data() + 1;  // unaligned on purpose: host access goes through memcpy
    for (std::size_t i = 0; i < in.size(); ++i) store_element(odd, t, static_cast<std::int64_t>(i), in[i]);
    std::vector<float> row(in.size());
    load_row(odd, t, 0, static_cast<int>(in.size()), row.data());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const float x = in[i];
      float expected = x;
      if (t == DType::kFloat16) expected = fp16_to_float(float_to_fp16(x));
      if (t == DType::kBFloat16) expected = bf16_to_float(float_to_bf16(x));
      const float got = load_element(odd, t, static_cast<std::int64_t>(i));
      ASSERT_EQ(bits(got), bits(expected)) << x;
      ASSERT_EQ(bits(row[i]), bits(expected));
    }
  }
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
}

}  // namespace
}  // namespace turboquant::core
