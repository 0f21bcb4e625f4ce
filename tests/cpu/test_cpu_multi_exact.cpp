// The fast CPU backend on multi-token rows, sinks and sliding windows: the
// golden model's bits (docs/ARITHMETIC.md §7) for every ISA this CPU runs and
// thread counts 1, 2, 3, on the grid of test_reference_multi.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/multi_problem.hpp"
#include "cpu/cpu_test_util.hpp"

namespace turboquant {
namespace {

using testing::combos;
using testing::make_multi_problem;
using testing::MultiProblem;

class CpuMultiTokenGrid : public ::testing::TestWithParam<int> {};

TEST_P(CpuMultiTokenGrid, GoldenBitsOnEveryIsaAndThreadCount) {
  const testing::Combo c = combos()[static_cast<std::size_t>(GetParam())];
  const std::uint32_t seed = 101 + static_cast<std::uint32_t>(GetParam());
  const testing::MultiSpec spec = testing::spec_of(c, seed);
  const std::string config = spec.name() + "_splits" + std::to_string(c.splits);
  SCOPED_TRACE(config);
  std::printf("seed %u: %s\n", seed, config.c_str());
  const MultiProblem m = make_multi_problem(spec);
  std::vector<float> want, want_lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(want, want_lse, c.splits)).ok());
  const std::vector<testing::CpuRun> runs = testing::all_cpu_runs({1, 2, 3});
  ASSERT_FALSE(runs.empty());
  for (const testing::CpuRun& run : runs) {
    SCOPED_TRACE(run.name());
    std::vector<float> out, lse;
    const Status s = run.backend->decode(m.p.view(), m.args(out, lse, c.splits), BackendOptions{.threads = run.threads});
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::int64_t at = testing::first_bit_difference(out, want);
    EXPECT_EQ(at, -1) << "out[" << at << "]";
    const std::int64_t lse_at = testing::first_bit_difference(lse, want_lse);
    EXPECT_EQ(lse_at, -1) << "lse[" << lse_at << "]";
    if (at != -1 || lse_at != -1) {
      testing::dump_bytes(config + "_" + run.isa, "out", out.data(), out.size() * 4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CpuMultiTokenGrid, ::testing::Range(0, static_cast<int>(combos().size())));

}  // namespace
}  // namespace turboquant
