// cuda::dequantize and cuda::dequantize_sequences against the golden model:
// the same bytes for every preset, layout, basis and output dtype (fp32 is the
// contract's bits, fp16 / bf16 their rounding), the sequence form writing only
// the rows below each seq_len, host pointers refused naming the argument.
#include <gtest/gtest.h>

#include "common/dequantize_problem.hpp"
#include "gpu_test_support.hpp"

namespace turboquant {
namespace {

using namespace testing;

class GpuDequantize : public ::testing::TestWithParam<std::tuple<Preset, LayoutKind, int>> {};

TEST_P(GpuDequantize, BytesEqualTheGoldenModel) {
  TQ_REQUIRE_DEVICE();
  const auto [preset, layout, head_dim] = GetParam();
  const std::vector<int> dims = cuda::supported_head_dims();
  if (std::find(dims.begin(), dims.end(), head_dim) == dims.end()) GTEST_SKIP() << "no instance for " << head_dim;
  ProblemSpec s;
  s.format = preset_format(preset, head_dim, layout);
  s.num_kv_heads = 3;  // odd: AoS slots of 4k + 2 bytes change phase between heads
  s.seq_lens = {1, 0, 77, 16, 300};
  s.seed = 5 + head_dim;
  const Problem p = make_problem(s);
  for (Basis basis : {Basis::kOriginal, Basis::kRotated}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (basis == Basis::kOriginal ? " original" : " rotated"));
      DequantOutputs want = canary_outputs(list_elements(p), t), got = canary_outputs(list_elements(p), t);
      ASSERT_TRUE(dequantize_reference(p.view(), list_args(p, want, t, basis)).ok());
      const Status st = cuda::dequantize_from_host(p.view(), list_args(p, got, t, basis));
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(got.keys, want.keys);
      EXPECT_EQ(got.values, want.values);

      const int max_seq = max_seq_of(p, 5);
      DequantOutputs seq = canary_outputs(sequence_elements(p, max_seq), t);
      const Status ss = cuda::dequantize_sequences_from_host(p.view(), sequence_args(p, seq, max_seq, t, basis));
      ASSERT_TRUE(ss.ok()) << ss.to_string();
      EXPECT_TRUE(sequences_match_list(p, seq.keys, want.keys, max_seq, t));
      EXPECT_TRUE(sequences_match_list(p, seq.values, want.values, max_seq, t));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PresetsLayoutsDims, GpuDequantize,
                         ::testing::Combine(::testing::ValuesIn(kAllPresets),
                                            ::testing::Values(LayoutKind::kSoA, LayoutKind::kAoS),
                                            ::testing::Values(64, 128, 256)),
                         [](const auto& info) {
                           return std::string(preset_name(std::get<0>(info.param)) + 11) + "_" +
                                  layout_name(std::get<1>(info.param)) + "_D" + std::to_string(std::get<2>(info.param));
                         });

TEST(GpuDequantizeApi, HostPointersAndBadShapesAreRefused) {
  ProblemSpec s;
  s.seq_lens = {20};
  const Problem p = make_problem(s);
  DequantOutputs o = canary_outputs(list_elements(p), DType::kFloat32);
  DequantizeArgs a = list_args(p, o, DType::kFloat32, Basis::kOriginal);
  a.num_slots = -1;
  EXPECT_EQ(cuda::dequantize_can_implement(p.view(), a).code(), StatusCode::kInvalidArgument);  // no device needed
  TQ_REQUIRE_DEVICE();
  a.num_slots = static_cast<std::int64_t>(p.slots.size());
  const Status st = cuda::dequantize(p.view(), a, nullptr);  // host pointers
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("cache.data"), std::string::npos) << st.message();
  std::vector<std::int64_t> bad = p.slots;
  bad[3] = p.num_blocks * 16;
  a.slots = {bad.data(), bad.size() * 8};
  const Status sb = cuda::dequantize_from_host(p.view(), a);
  EXPECT_EQ(sb.code(), StatusCode::kOutOfRange) << sb.to_string();
  EXPECT_NE(sb.message().find("slots[3]"), std::string::npos) << sb.message();
  EXPECT_TRUE(std::all_of(o.keys.begin(), o.keys.end(), [](std::uint8_t x) { return x == kDequantCanary; }));
}

}  // namespace
}  // namespace turboquant
