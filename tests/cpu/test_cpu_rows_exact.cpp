// The fast CPU backend's rows items (cpu/simd/decode_rows.hpp: the query rows
// of one sequence served by one read of the union of their split ranges) where
// the rows of one item differ: split boundaries that differ between rows
// sharing a tile (split_len(n) changes across the rows), windows shorter than
// a tile, one-token splits, q_len 128 with GQA 1/4/8 and sinks, FP8 keys that
// take the scalar decode (e4b15, NaN codes), block sizes that cut tiles,
// sequences with 0 or 1 rows next to longer ones, head_dim 256, and a
// sequence whose rows fall into two workspace chunks. The golden model's bits
// for every ISA this CPU runs, threads 1, 2, 3.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/multi_problem.hpp"
#include "cpu/cpu_test_util.hpp"

namespace turboquant {
namespace {

using testing::make_multi_problem;
using testing::MultiProblem;
using testing::MultiSpec;

MultiSpec spec(Format f, int group, std::vector<int> seq_lens, std::vector<int> q_lens, std::uint32_t seed) {
  MultiSpec m;
  m.base.format = f;
  m.base.group = group;
  m.base.seq_lens = std::move(seq_lens);
  m.base.seed = seed;
  m.q_lens = std::move(q_lens);
  std::printf("seed %u\n", seed);
  return m;
}

MultiSpec with_sinks(MultiSpec m) {
  m.sinks = testing::sink_values(m.base.num_kv_heads * m.base.group, m.base.seed);
  return m;
}

struct Check {
  int splits = 32;
  std::vector<int> threads = {1, 2, 3};
  bool nan_equal = false;  // NaN payloads are not part of the contract
  // The scalar ISA runs its rows one by one (decode_item); the larger cases
  // leave it to the others.
  bool scalar = true;
  // Compare with the best ISA's decode of the expanded single-token rows (the
  // one-row items, golden by test_cpu_decode_exact; the expansion identity is
  // test_reference_multi's) instead of the golden model: for problems whose
  // golden decode would take seconds.
  bool against_expanded = false;
};

void expect_golden(const MultiProblem& m, const Check& c = {}) {
  std::vector<float> want, want_lse;
  const Status ref = c.against_expanded
                         ? decode_cpu(m.p.view(), m.expanded_args(want, want_lse, c.splits), CpuOptions{1, ""})
                         : decode_reference(m.p.view(), m.args(want, want_lse, c.splits));
  ASSERT_TRUE(ref.ok()) << ref.to_string();
  std::vector<testing::CpuRun> runs = testing::all_cpu_runs(c.threads);
  if (!c.scalar) std::erase_if(runs, [](const testing::CpuRun& r) { return r.isa == "scalar"; });
  ASSERT_FALSE(runs.empty());
  for (const testing::CpuRun& run : runs) {
    SCOPED_TRACE(run.name() + " splits " + std::to_string(c.splits));
    std::vector<float> out, lse;
    const BackendOptions options{.threads = run.threads};
    const Status s = run.backend->decode(m.p.view(), m.args(out, lse, c.splits), options);
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::int64_t at = testing::first_bit_difference(out, want, c.nan_equal);
    EXPECT_EQ(at, -1) << "out[" << at << "] = " << (at >= 0 ? testing::float_hex(out[at]) : "") << ", want "
                      << (at >= 0 ? testing::float_hex(want[at]) : "");
    EXPECT_EQ(testing::first_bit_difference(lse, want_lse, c.nan_equal), -1);
  }
}

// 128 rows of 173..300 tokens: split_len(n) = 6..10 with 32 splits, so the
// rows of one item cut their tiles at different tokens; 40 rows of 31..70.
TEST(CpuRowsExact, SplitBoundariesDifferBetweenRows) {
  MultiSpec m = spec(preset_format(Preset::k4BitNc, 64), 4, {300, 70}, {128, 40}, 13001);
  m.base.num_kv_heads = 1;
  const MultiProblem p = make_multi_problem(m);
  expect_golden(p, {.threads = {1, 3}, .scalar = false});
  expect_golden(p, {.splits = 7, .threads = {2}, .scalar = false});
}

// Windows of 1 to 33 tokens: every row's range starts one token later than
// the previous row's, inside or across tiles.
TEST(CpuRowsExact, WindowsShorterThanATile) {
  const Format f = preset_format(Preset::kK3V4Nc, 64, LayoutKind::kAoS);
  for (int window : {1, 5, 15, 16, 17, 33}) {
    SCOPED_TRACE("window " + std::to_string(window));
    MultiSpec m = with_sinks(spec(f, 4, {90, 20}, {24, 20}, 13100 + window));
    m.window = window;
    const MultiProblem p = make_multi_problem(m);
    expect_golden(p, {.threads = {1, 3}});
    expect_golden(p, {.splits = 3, .threads = {2}});
  }
}

// More splits than tokens: every split of every row is one token (the union
// of one split index over the rows is q_len tokens wide).
TEST(CpuRowsExact, OneTokenSplits) {
  const MultiProblem m = make_multi_problem(spec(preset_format(Preset::k3BitNc, 64), 2, {100, 37}, {100, 9}, 13200));
  expect_golden(m, {.splits = 512});
  expect_golden(m, {.splits = 100, .threads = {2}});
}

// q_len 128 with GQA 1, 4 and 8 (register blocks of 1, 4, 8 heads and the
// remainders), sinks, with and without a window; one KV head.
TEST(CpuRowsExact, Q128GroupsAndSinks) {
  const Format formats[] = {preset_format(Preset::k4BitNc, 64, LayoutKind::kAoS), preset_format(Preset::kK8V4, 64),
                            preset_format(Preset::k3BitNc, 64)};
  int i = 0;
  for (int group : {1, 4, 8}) {
    SCOPED_TRACE("group " + std::to_string(group));
    MultiSpec m = spec(formats[i], group, {150}, {128}, 13300 + i);
    m.base.num_kv_heads = 1;
    m = with_sinks(m);
    m.window = i == 1 ? 64 : 0;
    expect_golden(make_multi_problem(m), {.threads = {1, 2}, .scalar = group == 1});
    ++i;
  }
}

// FP8 keys the vector decode does not take: every e4b15 key, and e4m3 NaN codes
// (the fold of such a tile is the scalar one).
TEST(CpuRowsExact, Fp8KeysOfTheScalarDecode) {
  const std::pair<LayoutKind, Fp8Format> kinds[] = {{LayoutKind::kAoS, Fp8Format::kE4b15},
                                                    {LayoutKind::kSoA, Fp8Format::kE4m3},
                                                    {LayoutKind::kAoS, Fp8Format::kE4m3}};
  int i = 0;
  for (const auto& [layout, fp8] : kinds) {
    MultiProblem m = make_multi_problem(
        spec(preset_format(Preset::kK8V4, 128, layout, fp8), 4, {100, 40}, {20, 8}, 13400 + i++));
    if (fp8 == Fp8Format::kE4m3) {
      for (std::int64_t blk = 0; blk < m.p.num_blocks; blk += 3) {
        m.p.cache[m.p.layout.block_base(blk) + m.p.layout.key_data_offset(3, 0) + 5] = 0x7f;
        m.p.cache[m.p.layout.block_base(blk) + m.p.layout.key_data_offset(7, 1) + 100] = 0xff;
      }
    }
    expect_golden(m, {.threads = {1, 2}, .nan_equal = true});
  }
}

// Blocks of 1, 5 and 64 tokens: a tile's records in up to 16 blocks, or tiles
// starting inside a block.
TEST(CpuRowsExact, BlockSizes) {
  for (int block : {1, 5, 64}) {
    SCOPED_TRACE("block_size " + std::to_string(block));
    MultiSpec m = spec(preset_format(Preset::k4BitNc, 64), 4, {77, 130}, {16, 33}, 13500 + block);
    m.base.block_size = block;
    m.window = block == 5 ? 40 : 0;
    expect_golden(make_multi_problem(m), {.threads = {1, 2}});
  }
}

// Sequences with no row and with one row next to multi-row ones (the one-row
// item and the rows item in one call), and head_dim 256.
TEST(CpuRowsExact, MixedRowCountsAndHeadDim256) {
  const MultiProblem m =
      make_multi_problem(with_sinks(spec(preset_format(Preset::kK3V4Nc, 256), 4, {50, 20, 33, 1, 64}, {0, 1, 7, 1, 2},
                                         13600)));
  expect_golden(m);
  expect_golden(m, {.splits = 2, .threads = {2}});
}

// 128 rows of ~1000 tokens in 1024 one-token splits: each row's partials take
// ~2.6 MB, so the 256 MiB workspace cap puts the sequence's rows into two
// chunks (two rows items per split, each over its own rows).
TEST(CpuRowsExact, RowsAcrossWorkspaceChunks) {
  MultiSpec m = spec(preset_format(Preset::k3BitNc, 64), 8, {1024, 5}, {128, 3}, 13700);
  m.base.num_kv_heads = 1;
  m.base.block_size = 64;
  expect_golden(make_multi_problem(m), {.splits = 1024, .threads = {2}, .scalar = false, .against_expanded = true});
}

}  // namespace
}  // namespace turboquant
