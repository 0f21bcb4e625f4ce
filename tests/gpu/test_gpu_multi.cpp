// CUDA decode of multi-token rows, attention sinks and sliding windows
// (docs/ARITHMETIC.md §7): both modes run the strict kernels there and must
// give the golden model's bits (out and LSE) on the grid of the CPU's
// multi-token tests, and equal the expanded single-token rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/multi_problem.hpp"
#include "gpu_test_support.hpp"

namespace turboquant {
namespace {

using testing::combos;
using testing::make_multi_problem;
using testing::MultiProblem;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class GpuMultiTokenGrid : public ::testing::TestWithParam<int> {};

TEST_P(GpuMultiTokenGrid, BothModesGiveTheGoldenBits) {
  TQ_REQUIRE_DEVICE();
  const testing::Combo c = combos()[static_cast<std::size_t>(GetParam())];
  const std::vector<int> dims = cuda::supported_head_dims();
  if (std::find(dims.begin(), dims.end(), c.head_dim) == dims.end()) GTEST_SKIP() << "no instance for " << c.head_dim;
  const testing::MultiSpec spec = testing::spec_of(c, 101 + static_cast<std::uint32_t>(GetParam()));
  SCOPED_TRACE(spec.name() + "_splits" + std::to_string(c.splits));
  const MultiProblem m = make_multi_problem(spec);
  std::vector<float> want, want_lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(want, want_lse, c.splits)).ok());
  for (cuda::CudaMode mode : {cuda::CudaMode::kStrict, cuda::CudaMode::kFast}) {
    SCOPED_TRACE(cuda::mode_name(mode));
    std::vector<float> out, lse;
    const DecodeArgs a = m.args(out, lse, c.splits);
    EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, mode), "cuda:strict");
    const Status s = cuda::decode_from_host(m.p.view(), a, mode);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_TRUE(same_bits(out, want));
    EXPECT_TRUE(same_bits(lse, want_lse));
  }
  // The expanded rows (no query_start_loc) on the GPU give the same bits too.
  std::vector<float> out, lse;
  ASSERT_TRUE(cuda::decode_from_host(m.p.view(), m.expanded_args(out, lse, c.splits), cuda::CudaMode::kStrict).ok());
  EXPECT_TRUE(same_bits(out, want));
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuMultiTokenGrid, ::testing::Range(0, static_cast<int>(combos().size())));

TEST(GpuMultiToken, RowsPastTheGridLimitAreRefused) {
  testing::MultiSpec spec;
  spec.base.seq_lens = {40, 9};
  spec.q_lens = {3, 2};
  const MultiProblem m = make_multi_problem(spec);
  std::vector<float> out, lse;
  DecodeArgs a = m.args(out, lse);
  EXPECT_TRUE(cuda::decode_can_implement(m.p.view(), a, cuda::CudaMode::kFast).ok());
  a.batch = 600;  // 600 x 128 rows exceed the grid's 65535 (shapes only: no buffer is read)
  a.num_query_rows = 600 * 128;
  const Status s = cuda::decode_can_implement(m.p.view(), a, cuda::CudaMode::kStrict);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("65535"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace turboquant
