// The contract's math primitives: exp2/log2 accuracy, the Walsh-Hadamard
// rotation, the 16-lane dot product order, the split plan and the softmax state.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "turboquant/core/exp2_log.hpp"
#include "turboquant/core/reduction.hpp"
#include "turboquant/core/rotation.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::core {
namespace {

double ulp_error(float got, double exact) {
  const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
  return std::fabs(got - exact) / ulp;
}

TEST(Exp2, WithinTwoUlpOverTheSoftmaxRange) {
  double worst = 0;
  for (float x = -125.9f; x <= 0.0f; x += 0.000731f) worst = std::max(worst, ulp_error(exp2_tq(x), std::exp2(double(x))));
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = -static_cast<float>(i) / (1 << 16);  // dense near 0
    worst = std::max(worst, ulp_error(exp2_tq(x), std::exp2(double(x))));
  }
  EXPECT_LE(worst, 2.0);
  RecordProperty("exp2_max_ulp", std::to_string(worst));
}

TEST(Exp2, EdgeCases) {
  EXPECT_EQ(exp2_tq(0.0f), 1.0f);
  EXPECT_EQ(exp2_tq(1.0f), 2.0f);
  EXPECT_EQ(exp2_tq(-1.0f), 0.5f);
  EXPECT_EQ(exp2_tq(-kInf), 0.0f);
  EXPECT_EQ(exp2_tq(-126.0f), 0.0f);  // flushed: documented in ARITHMETIC.md
  EXPECT_GT(exp2_tq(-125.99f), 0.0f);
  EXPECT_EQ(exp2_tq(200.0f), kInf);
  EXPECT_TRUE(std::isnan(exp2_tq(std::nanf(""))));
  EXPECT_NEAR(exp2_tq(127.5f), std::exp2(127.5), std::exp2(127.5) * 3e-7);
}

TEST(Log2, AccurateEverywhere) {
  double worst_abs = 0;
  for (float x = 1.0f; x < 4e6f; x *= 1.0001f) {
    worst_abs = std::max(worst_abs, std::fabs(log2_tq(x) - std::log2(double(x))));
  }
  EXPECT_LE(worst_abs, 4e-6);  // |log2 x| up to 22: about 2 ulp of the result
  for (float x : {1e-30f, 1e-40f, 0.3f, 0.7071f, 1.4142f, 3e38f}) {
    EXPECT_NEAR(log2_tq(x), std::log2(double(x)), 2e-6 * std::max(1.0, std::fabs(std::log2(double(x))))) << x;
  }
  EXPECT_EQ(log2_tq(1.0f), 0.0f);
  EXPECT_EQ(log2_tq(8.0f), 3.0f);
  EXPECT_EQ(log2_tq(0.0f), -kInf);
  EXPECT_TRUE(std::isnan(log2_tq(-1.0f)));
  EXPECT_EQ(log2_tq(kInf), kInf);
}

TEST(Hadamard, FastTransformEqualsSylvesterMatrix) {
  for (int n : {16, 64, 128, 256, 512}) {
    // Sylvester: H[i][j] = (-1)^popcount(i & j).
    std::mt19937 rng(n);
    std::normal_distribution<float> dist;
    std::vector<float> x(n), y(n), z(n);
    for (float& v : x) v = dist(rng);
    rotate_forward(Rotation{}, x.data(), y.data(), n);
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
      EXPECT_NEAR(y[i], s / std::sqrt(double(n)), 1e-5) << n << " " << i;
    }
    rotate_inverse(Rotation{}, y.data(), z.data(), n);  // orthonormal and symmetric
    for (int i = 0; i < n; ++i) EXPECT_NEAR(z[i], x[i], 1e-5);
  }
}

TEST(Hadamard, InverseSqrtIsCorrectlyRounded) {
  for (int n = 1; n <= 4096; n *= 2) EXPECT_EQ(inv_sqrt_pow2(n), static_cast<float>(1.0 / std::sqrt(double(n)))) << n;
}

TEST(Rotation, DenseMatrixMatchesHadamardWhenGivenOne) {
  const int n = 64;
  std::vector<float> pit(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) pit[i * n + j] = (__builtin_popcount(i & j) % 2 ? -1.0f : 1.0f) * 0.125f;
  std::vector<float> x(n), a(n), b(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(float(i));
  rotate_forward(Rotation{}, x.data(), a.data(), n);
  rotate_forward(Rotation{pit.data()}, x.data(), b.data(), n);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(Dot16, FollowsTheLaneOrderExactly) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(128), b(128);
  for (int i = 0; i < 128; ++i) a[i] = dist(rng), b[i] = dist(rng) * 1e3f;
  float lanes[16] = {};
  for (int k = 0; k < 8; ++k)
    for (int j = 0; j < 16; ++j) lanes[j] = std::fma(a[16 * k + j], b[16 * k + j], lanes[j]);
  float l8[8], l4[4], l2[2];
  for (int j = 0; j < 8; ++j) l8[j] = lanes[j] + lanes[j + 8];
  for (int j = 0; j < 4; ++j) l4[j] = l8[j] + l8[j + 4];
  for (int j = 0; j < 2; ++j) l2[j] = l4[j] + l4[j + 2];
  EXPECT_EQ(float_bits(dot16(a.data(), b.data(), 128)), float_bits(l2[0] + l2[1]));
}

TEST(SplitPlan, CoversEveryTokenOnceInOrder) {
  for (int seq : {0, 1, 2, 15, 16, 17, 31, 32, 33, 37, 100, 1000, 5000, 1000000}) {
    for (int splits : {1, 2, 3, 7, 32, 64, 1024}) {
      int next = 0;
      for (int s = 0; s < splits; ++s) {
        const TokenRange r = split_range(seq, splits, s);
        if (r.empty()) continue;
        ASSERT_EQ(r.begin, next) << seq << "/" << splits;
        ASSERT_LE(r.size(), split_len(seq, splits));
        next = r.end;
      }
      ASSERT_EQ(next, seq) << seq << "/" << splits;
    }
  }
}

TEST(Softmax, TileFoldAndMergeEqualDirectSoftmax) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 8.0f);
  std::vector<float> scores(1000), values(1000);
  for (int i = 0; i < 1000; ++i) scores[i] = dist(rng), values[i] = dist(rng);
  double mx = -1e300, den = 0, num = 0;
  for (float s : scores) mx = std::max(mx, double(s));
  for (int i = 0; i < 1000; ++i) den += std::exp2(scores[i] - mx), num += std::exp2(scores[i] - mx) * values[i];
  // Two splits of 16-token tiles, merged.
  float merged_max = -kInf, sum = 0, acc = 0;
  SoftmaxState st[2];
  float part_acc[2] = {0, 0};
  for (int s = 0; s < 2; ++s) {
    const TokenRange r = split_range(1000, 2, s);
    for (int t = r.begin; t < r.end; t += kTileTokens) {
      const int n = std::min(kTileTokens, r.end - t);
      float p[kTileTokens];
      const float alpha = softmax_fold_tile(st[s], &scores[t], n, p);
      part_acc[s] = rescale(part_acc[s], alpha);
      for (int i = 0; i < n; ++i) part_acc[s] = accumulate(part_acc[s], p[i], values[t + i]);
    }
    merged_max = merge_max(merged_max, st[s].max);
  }
  for (int s = 0; s < 2; ++s) {
    const float w = merge_weight(st[s].max, merged_max);
    sum = merge_add(sum, w, st[s].sum);
    acc = merge_add(acc, w, part_acc[s]);
  }
  EXPECT_NEAR(finalize_output(acc, sum, merged_max), num / den, 1e-5 * std::fabs(num / den) + 1e-6);
  EXPECT_NEAR(finalize_lse(sum, merged_max), (mx + std::log2(den)) * std::log(2.0), 1e-5);
  EXPECT_EQ(finalize_output(0.0f, 0.0f, -kInf), 0.0f);
  EXPECT_EQ(finalize_lse(0.0f, -kInf), -kInf);
}

}  // namespace
}  // namespace turboquant::core
