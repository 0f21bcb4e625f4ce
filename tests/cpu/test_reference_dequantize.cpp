// Dequantize: rotated and original bases, against the stored K/V.
#include <gtest/gtest.h>

#include "common/random_problem.hpp"
#include "common/shape_grid.hpp"
#include "turboquant/core/rotation.hpp"
#include "turboquant/dequantize.hpp"

namespace turboquant {
namespace {

// Single-vector errors measured by vLLM on randn data (facts §e): keys 4-bit
// 9.6%, 3-bit 18.3%, FP8 2.7%; values 4-bit 9.5%, 3-bit 20.4%.
struct ErrorBound {
  Preset preset;
  double key_err, value_err;
};
const ErrorBound kBounds[] = {{Preset::k4BitNc, 0.11, 0.11},
                              {Preset::kK3V4Nc, 0.20, 0.11},
                              {Preset::k3BitNc, 0.20, 0.22},
                              {Preset::kK8V4, 0.035, 0.11}};

class ReferenceDequantizePreset : public ::testing::TestWithParam<ErrorBound> {};

TEST_P(ReferenceDequantizePreset, ReconstructsKeysAndValuesWithinQuantizationError) {
  const ErrorBound& r = GetParam();
  testing::ProblemSpec spec;
  spec.format = preset_format(r.preset, 128);
  spec.seq_lens = {64};
  const auto p = testing::make_problem(spec);
  const std::size_t n = p.slots.size() * 2 * 128;
  std::vector<float> k(n), v(n), k_rot(n), v2(n);
  DequantizeArgs a;
  a.slots = {p.slots.data(), p.slots.size() * 8};
  a.num_slots = static_cast<std::int64_t>(p.slots.size());
  a.keys = {k.data(), n * 4};
  a.values = {v.data(), n * 4};
  ASSERT_TRUE(dequantize_reference(p.view(), a).ok());
  EXPECT_LT(testing::rel_l2(k, p.keys), r.key_err) << preset_name(r.preset);
  EXPECT_LT(testing::rel_l2(v, p.values), r.value_err) << preset_name(r.preset);

  a.basis = Basis::kRotated;
  a.keys = {k_rot.data(), n * 4};
  a.values = {v2.data(), n * 4};
  ASSERT_TRUE(dequantize_reference(p.view(), a).ok());
  EXPECT_EQ(v, v2);
  if (spec.format.fp8_keys()) {
    EXPECT_EQ(k, k_rot);  // FP8 keys are never rotated
    return;
  }
  // Rotating the rotated keys back gives the original-basis keys.
  for (std::size_t row = 0; row < n / 128; ++row) {
    float back[128];
    core::rotate_inverse(core::Rotation{}, &k_rot[row * 128], back, 128);
    for (int d = 0; d < 128; ++d) ASSERT_EQ(back[d], k[row * 128 + d]);
  }
}
INSTANTIATE_TEST_SUITE_P(Presets, ReferenceDequantizePreset, ::testing::ValuesIn(kBounds),
                         [](const ::testing::TestParamInfo<ErrorBound>& info) {
                           return testing::preset_short_name(info.param.preset);
                         });

TEST(ReferenceDequantize, RejectsBadSlotsAndBuffers) {
  testing::ProblemSpec spec;
  spec.seq_lens = {5};
  const auto p = testing::make_problem(spec);
  std::vector<float> k(5 * 2 * 128), v(k.size());
  std::vector<std::int64_t> slots = p.slots;
  slots[2] = -1;
  DequantizeArgs a;
  a.slots = {slots.data(), slots.size() * 8};
  a.num_slots = 5;
  a.keys = {k.data(), k.size() * 4};
  a.values = {v.data(), v.size() * 4};
  Status s = dequantize_reference(p.view(), a);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("slots[2] = -1"), std::string::npos) << s.message();
  slots[2] = p.slots[2];
  a.values.bytes = 16;
  s = dequantize_reference(p.view(), a);
  EXPECT_EQ(s.code(), StatusCode::kBufferTooSmall);
  EXPECT_NE(s.message().find("values has 16 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace turboquant
