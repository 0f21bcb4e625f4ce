// CUDA decode of multi-token rows, attention sinks and sliding windows
// (docs/ARITHMETIC.md §7) on the grid of the CPU's multi-token tests: strict
// gives the golden model's bits (out and LSE) and equals the expanded
// single-token rows; fast (rows x heads as the mma columns, fast_decode.cuh)
// is within the fast mode's bound of the golden model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/multi_problem.hpp"
#include "decode_setup.hpp"
#include "fast_plan.hpp"
#include "gpu_test_support.hpp"
#include "tensor_box.hpp"

namespace turboquant::cuda::detail {
// gpu/src/launch.hpp (internal; it includes a generated header): the current
// device's multiprocessors and resident fast blocks per SM of an instance.
int device_sm_count();
int fast_decode_occupancy(const core::Format& f, bool tensor_copy, int column_tiles, int warps);
}  // namespace turboquant::cuda::detail

namespace turboquant {
namespace {

using testing::combos;
using testing::make_multi_problem;
using testing::MultiProblem;
using tq_gpu_test::rel_l2;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Fast mode against the golden rows: relative L2 of the whole output, each
// head row's error against its own norm (a row that a large sink makes tiny
// gets an absolute floor), and the LSE.
void expect_fast_close(const std::vector<float>& got, const std::vector<float>& got_lse,
                       const std::vector<float>& want, const std::vector<float>& want_lse, int dims) {
  EXPECT_LE(rel_l2(got, want), 1e-3);
  for (std::size_t r = 0; r < want_lse.size(); ++r) {
    double num = 0.0, den = 0.0;
    for (int d = 0; d < dims; ++d) {
      const double x = want[r * dims + d], e = got[r * dims + d] - x;
      num += e * e;
      den += x * x;
    }
    ASSERT_LE(std::sqrt(num), 1e-2 * std::sqrt(den) + 1e-6) << "head row " << r;
    if (std::isinf(want_lse[r])) {
      EXPECT_EQ(got_lse[r], want_lse[r]) << "head row " << r;
    } else {
      ASSERT_LE(std::fabs(double(got_lse[r]) - want_lse[r]), 1e-2) << "head row " << r;
    }
  }
}

// Strict: the golden bits and the kernel's name; fast: the fast kernel within its bound.
void expect_both_modes(const MultiProblem& m, int splits) {
  const int dims = m.p.layout.format.head_dim;
  std::vector<float> want, want_lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(want, want_lse, splits)).ok());
  {
    std::vector<float> out, lse;
    const DecodeArgs a = m.args(out, lse, splits);
    EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kStrict), "cuda:strict");
    const Status s = cuda::decode_from_host(m.p.view(), a, cuda::CudaMode::kStrict);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_TRUE(same_bits(out, want));
    EXPECT_TRUE(same_bits(lse, want_lse));
  }
  std::vector<float> out, lse;
  const DecodeArgs a = m.args(out, lse, splits);
  EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kFast), "cuda:fast");
  const Status s = cuda::decode_from_host(m.p.view(), a, cuda::CudaMode::kFast);
  ASSERT_TRUE(s.ok()) << s.to_string();
  expect_fast_close(out, lse, want, want_lse, dims);
}

// The wide kernel wherever fast_column_tiles picks it: the tests' problems
// are far shorter than the plan's rule (wide_pays_off) gives it.
struct ForceWideKernel : tq_gpu_test::PolicyScope<cuda::detail::WidePolicy> {
  ForceWideKernel()
      : PolicyScope(cuda::detail::wide_policy, cuda::detail::set_wide_policy, cuda::detail::WidePolicy::kForce) {}
};

// The wide kernel of the test's scope (decode_setup.hpp): the classic
// four-warp blocks or the warpgroups in roles.
struct WideKernelScope : tq_gpu_test::PolicyScope<cuda::detail::WideKernel> {
  explicit WideKernelScope(cuda::detail::WideKernel kernel)
      : PolicyScope(cuda::detail::wide_kernel, cuda::detail::set_wide_kernel, kernel) {}
};
constexpr cuda::detail::WideKernel kWideKernels[] = {cuda::detail::WideKernel::kClassic,
                                                     cuda::detail::WideKernel::kSpecialized};
const char* wide_kernel_name(cuda::detail::WideKernel k) {
  return k == cuda::detail::WideKernel::kClassic ? "classic" : "specialized";
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
  const ForceWideKernel force;
  expect_both_modes(m, c.splits);
  std::vector<float> want, want_lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(want, want_lse, c.splits)).ok());
  // The expanded rows (no query_start_loc) on the GPU give the same bits too.
  std::vector<float> out, lse;
  ASSERT_TRUE(cuda::decode_from_host(m.p.view(), m.expanded_args(out, lse, c.splits), cuda::CudaMode::kStrict).ok());
  EXPECT_TRUE(same_bits(out, want));
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuMultiTokenGrid, ::testing::Range(0, static_cast<int>(combos().size())));

// Sequences without query rows (q_len 0: idle fast blocks), a window that
// starts inside a tile and a cache block, sinks, GQA 4 (two rows per fast
// block); AoS with 2 KV heads (the cp.async loader) and 8 (tensor copies).
TEST(GpuMultiToken, SequencesWithoutRowsAndWindowsInsideATile) {
  TQ_REQUIRE_DEVICE();
  for (const auto [layout, kv_heads] : {std::pair{LayoutKind::kSoA, 2}, std::pair{LayoutKind::kAoS, 2},
                                        std::pair{LayoutKind::kAoS, 8}}) {
    testing::MultiSpec spec;
    spec.base.format = preset_format(Preset::k4BitNc, 128, layout);
    spec.base.num_kv_heads = kv_heads;
    spec.base.group = 4;
    spec.base.block_size = 32;
    spec.base.seq_lens = {50, 20, 300, 1};
    spec.base.seed = 77;
    spec.q_lens = {5, 0, 13, 1};
    spec.window = 37;
    spec.sinks = testing::sink_values(spec.base.num_kv_heads * 4, 5);
    SCOPED_TRACE(spec.name());
    expect_both_modes(make_multi_problem(spec), 32);
  }
}

// The fast kernel's column tiles (fast_plan.hpp) for a multi-token problem.
int column_tiles_of(const MultiProblem& m) {
  const int group = m.p.num_q_heads / m.p.layout.num_kv_heads;
  return cuda::detail::fast_column_tiles(true, group, m.rows, m.p.batch, m.p.layout.format.head_dim);
}

// The grid above runs every fast instance of multi-token rows: one column
// tile (8 columns), two (16: each dequantized fragment feeds two mma) and the
// wide kernel (up to 64 columns, wide_decode.cuh).
TEST(GpuMultiToken, TheGridCoversEveryColumnTiling) {
  int tiles[cuda::detail::kFastWideColumnTiles + 1] = {};
  for (std::size_t i = 0; i < combos().size(); ++i) {
    ++tiles[column_tiles_of(make_multi_problem(testing::spec_of(combos()[i], 101 + static_cast<std::uint32_t>(i))))];
  }
  std::printf("combos with 1 / 2 column tiles / wide: %d / %d / %d\n", tiles[1], tiles[2],
              tiles[cuda::detail::kFastWideColumnTiles]);
  EXPECT_GE(tiles[1], 5);
  EXPECT_GE(tiles[2], 5);
  EXPECT_GE(tiles[cuda::detail::kFastWideColumnTiles], 10);
}

// Two column tiles with a group that does not divide them (5 rows x 3 heads =
// 15 columns, a row across the tiles' boundary), D 64 and 128, both layouts,
// windows and sinks; and the same rows with GQA 8 (2 rows x 8 heads).
TEST(GpuMultiToken, TwoColumnTilesWithRowsAcrossTheTileBoundary) {
  TQ_REQUIRE_DEVICE();
  for (const auto [layout, dims, group] : {std::tuple{LayoutKind::kSoA, 128, 3}, std::tuple{LayoutKind::kAoS, 64, 3},
                                          std::tuple{LayoutKind::kAoS, 128, 8}, std::tuple{LayoutKind::kSoA, 64, 8}}) {
    testing::MultiSpec spec;
    spec.base.format = preset_format(Preset::k4BitNc, dims, layout);
    spec.base.num_kv_heads = 2;
    spec.base.group = group;
    spec.base.block_size = 16;
    spec.base.seq_lens = {90, 7, 260};
    spec.base.seed = 31;
    // 8 to 16 columns per sequence on average (more than 32 take the wide kernel).
    spec.q_lens = group == 3 ? std::vector<int>{5, 4, 3} : std::vector<int>{3, 1, 2};
    spec.window = 45;
    spec.sinks = testing::sink_values(spec.base.num_kv_heads * group, 3);
    SCOPED_TRACE(spec.name());
    const MultiProblem m = make_multi_problem(spec);
    ASSERT_EQ(column_tiles_of(m), 2);
    expect_both_modes(m, 32);
  }
}

// Two column tiles in twelve-warp blocks (kFastDeepWarps): 32 KV heads and 4
// sequences of 2 to 4 rows (13 rows x GQA 4: two column tiles) are 128 units,
// a wave of the twelve-warp blocks on a device of up to 255 SMs, so the plan
// cuts no split and the longest sequence (1500 tokens) is one split: long
// enough (fast_deep_pays_off). Both layouts, a window and sinks.
TEST(GpuMultiToken, TwoColumnTilesInTwelveWarpBlocks) {
  TQ_REQUIRE_DEVICE();
  for (const LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    for (int window : {0, 300}) {
      testing::MultiSpec spec;
      spec.base.format = preset_format(Preset::k4BitNc, 128, layout);
      spec.base.num_kv_heads = 32;
      spec.base.group = 4;
      spec.base.block_size = 16;
      spec.base.seq_lens = {1100, 1500, 700, 1030};
      spec.base.seed = 61 + window;
      spec.q_lens = {4, 4, 3, 2};
      spec.window = window;
      spec.sinks = testing::sink_values(spec.base.num_kv_heads * spec.base.group, 5);
      SCOPED_TRACE(spec.name());
      const MultiProblem m = make_multi_problem(spec);
      ASSERT_EQ(column_tiles_of(m), 2);
      const int rows_per_block = cuda::detail::fast_rows_per_block(true, spec.base.group, 2);
      const std::int64_t units = (m.rows + rows_per_block - 1) / rows_per_block * spec.base.num_kv_heads;
      const std::int64_t resident = std::int64_t{cuda::detail::device_sm_count()} *
                                    cuda::detail::fast_decode_occupancy(spec.base.format, false, 2,
                                                                        cuda::detail::kFastDeepWarps);
      ASSERT_GT(resident, 0);
      const std::int64_t max_seq_tokens = std::int64_t{m.p.max_blocks} * spec.base.block_size;  // 1504
      ASSERT_TRUE(cuda::detail::fast_deep_pays_off(max_seq_tokens, std::max<std::int64_t>(resident / units, 1)));
      expect_both_modes(m, 32);
    }
  }
}

// The wide kernel, both of them: 64 columns per block, 16 per warp. GQA 3
// (21 rows x 3 heads: rows across the warps' boundaries) and 8, D 64 and
// 128, both layouts, a window and sinks; a sequence with more rows than a
// block holds (70: four row blocks), one with as many rows as tokens, one
// with 2 rows; splits of one step to many (the specialized blocks' two
// consumers take alternate steps).
TEST(GpuMultiToken, WideColumnsWithRowsAcrossTheWarps) {
  TQ_REQUIRE_DEVICE();
  const ForceWideKernel force;
  for (const auto& [layout, dims, group] : {std::tuple{LayoutKind::kSoA, 128, 3}, std::tuple{LayoutKind::kAoS, 64, 3},
                                            std::tuple{LayoutKind::kAoS, 128, 8}, std::tuple{LayoutKind::kSoA, 64, 8}}) {
    for (const auto [window, kernel] : {std::pair{0, kWideKernels[0]}, std::pair{45, kWideKernels[0]},
                                        std::pair{0, kWideKernels[1]}, std::pair{45, kWideKernels[1]}}) {
      const WideKernelScope scope(kernel);
      SCOPED_TRACE(wide_kernel_name(kernel));
      testing::MultiSpec spec;
      spec.base.format = preset_format(Preset::k4BitNc, dims, layout);
      spec.base.num_kv_heads = 2;
      spec.base.group = group;
      spec.base.block_size = 16;
      spec.base.seq_lens = {90, 7, 700, 33};
      spec.base.seed = 41 + window;
      spec.q_lens = {30, 7, 70, 2};
      spec.window = window;
      spec.sinks = testing::sink_values(spec.base.num_kv_heads * group, 3);
      SCOPED_TRACE(spec.name());
      const MultiProblem m = make_multi_problem(spec);
      ASSERT_EQ(column_tiles_of(m), cuda::detail::kFastWideColumnTiles);
      for (const int splits : {32, 1}) expect_both_modes(m, splits);
    }
  }
}

// The specialized wide blocks fit the device, one an SM, for every format
// and loader at D 128 (shared memory: WideSpecializedSmem's static_assert).
TEST(GpuMultiToken, SpecializedWideBlocksFitTheDevice) {
  TQ_REQUIRE_DEVICE();
  for (const Preset preset : kAllPresets) {
    for (const LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
      const core::Format f = preset_format(preset, 128, layout);
      for (const bool boxes : {false, true}) {
        SCOPED_TRACE(std::string(preset_name(preset)) + (boxes ? " tensor copies" : " cp.async"));
        EXPECT_EQ(cuda::detail::fast_decode_occupancy(f, boxes, cuda::detail::kFastWideColumnTiles,
                                                      cuda::detail::kWideSpecializedWarps),
                  1);
      }
    }
  }
}

// The wide kernel's loader for the test's scope (decode_setup.hpp).
struct WideLoaderScope : tq_gpu_test::PolicyScope<cuda::detail::WideLoader> {
  explicit WideLoaderScope(cuda::detail::WideLoader loader)
      : PolicyScope(cuda::detail::wide_loader, cuda::detail::set_wide_loader, loader) {}
};

// The wide kernel's two loaders stage the same bytes, so tensor copies and
// cp.async give the same bits: every preset in both layouts at D 128 with 8
// KV heads (AoS token strides of whole 16-byte units: every layout takes
// boxes), GQA 4, a window and sinks; and both within the fast bound; for
// both wide kernels, over many splits and one.
TEST(GpuMultiToken, WideLoadersGiveTheSameBits) {
  TQ_REQUIRE_DEVICE();
  const ForceWideKernel force;
  int boxed = 0;
  for (const Preset preset : kAllPresets) {
    for (const auto [layout, kernel] :
         {std::pair{LayoutKind::kSoA, kWideKernels[0]}, std::pair{LayoutKind::kAoS, kWideKernels[0]},
          std::pair{LayoutKind::kSoA, kWideKernels[1]}, std::pair{LayoutKind::kAoS, kWideKernels[1]}}) {
      const WideKernelScope scope(kernel);
      SCOPED_TRACE(wide_kernel_name(kernel));
      testing::MultiSpec spec;
      spec.base.format = preset_format(preset, 128, layout);
      spec.base.num_kv_heads = 8;
      spec.base.group = 4;
      spec.base.block_size = 16;
      spec.base.seq_lens = {150, 37};
      spec.base.seed = 77;
      spec.q_lens = {16, 5};
      spec.window = 120;
      spec.sinks = testing::sink_values(spec.base.num_kv_heads * spec.base.group, 5);
      SCOPED_TRACE(spec.name());
      const MultiProblem m = make_multi_problem(spec);
      ASSERT_EQ(column_tiles_of(m), cuda::detail::kFastWideColumnTiles);
      boxed += cuda::detail::wide_tensor_copy_fits(m.p.layout);
      for (const int splits : {32, 1}) {
        std::vector<float> out[2], lse[2];
        for (const bool boxes : {false, true}) {
          const WideLoaderScope loader(boxes ? cuda::detail::WideLoader::kTensor : cuda::detail::WideLoader::kCpAsync);
          const Status st =
              cuda::decode_from_host(m.p.view(), m.args(out[boxes], lse[boxes], splits), cuda::CudaMode::kFast);
          ASSERT_TRUE(st.ok()) << st.to_string();
        }
        EXPECT_TRUE(same_bits(out[0], out[1]));
        EXPECT_TRUE(same_bits(lse[0], lse[1]));
        std::vector<float> want, want_lse;
        ASSERT_TRUE(decode_reference(m.p.view(), m.args(want, want_lse, splits)).ok());
        expect_fast_close(out[1], lse[1], want, want_lse, 128);
      }
    }
  }
  EXPECT_EQ(boxed, 16);
}

// Two sequences of 3 and 2 query rows, for the shape-only tests below.
MultiProblem two_sequences_with_rows() {
  testing::MultiSpec spec;
  spec.base.seq_lens = {40, 9};
  spec.q_lens = {3, 2};
  return make_multi_problem(spec);
}

// Past the fast grid's z limit (rows / R + batch > 65535) the strict kernels
// take multi-token rows in fast mode too (shapes only: no buffer is read).
TEST(GpuMultiToken, FastGridPastItsLimitTakesTheStrictKernel) {
  const MultiProblem m = two_sequences_with_rows();
  std::vector<float> out, lse;
  DecodeArgs a = m.args(out, lse);
  EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kFast), "cuda:fast");
  a.batch = 65000;  // mostly sequences of q_len 0
  a.num_query_rows = 4000;
  EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kFast), "cuda:strict");
}

TEST(GpuMultiToken, RowsPastTheGridLimitAreRefused) {
  const MultiProblem m = two_sequences_with_rows();
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
