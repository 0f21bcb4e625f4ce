// decode_cpu must produce the bits of decode_reference (out and LSE) for every
// ISA this CPU runs and every thread count: the edge grid of issue 4 on short
// sequences, long sequences on a rotating subset, and the odd corners (dtypes,
// split counts, dense rotations, custom codebooks, NaN FP8 codes, overflowing
// scores, large GQA groups, nested TBB use). Every grid runs both layouts
// (issue 12): SoA on all of it, AoS on a diagonal subset (with_aos) that
// still varies every axis, k8v4 with both FP8 flavours.
#include <gtest/gtest.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <random>

#include "common/random_problem.hpp"
#include "common/shape_grid.hpp"
#include "cpu_test_util.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/core/half.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant {
namespace {

using testing::all_cpu_runs;
using testing::CpuRun;
using testing::make_problem;
using testing::Problem;
using testing::ProblemSpec;

struct Variant {
  int splits = 32;
  DType query_dtype = DType::kFloat32;
  DType out_dtype = DType::kFloat32;
  bool with_lse = true;
  float scale = 0.0f;  // 0: the problem's 1/sqrt(D)
  const Codebook* codebook = nullptr;
  const std::vector<float>* rotation = nullptr;
  bool nan_equal = false;  // NaN payloads are not part of the contract

  std::string name() const {
    return "splits" + std::to_string(splits) + "_q" + dtype_name(query_dtype) + "_o" + dtype_name(out_dtype) +
           (with_lse ? "" : "_nolse") + (codebook ? "_cb" : "") + (rotation ? "_rot" : "");
  }
};

std::vector<std::uint8_t> query_bytes(const Problem& p, DType t) {
  std::vector<std::uint8_t> bytes(p.query.size() * dtype_size(t));
  for (std::size_t i = 0; i < p.query.size(); ++i) {
    if (t == DType::kFloat32) {
      std::memcpy(&bytes[4 * i], &p.query[i], 4);
    } else {
      const std::uint16_t h = t == DType::kFloat16 ? core::float_to_fp16(p.query[i]) : core::float_to_bf16(p.query[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

// Runs the reference once and every (ISA, threads) of `runs`; all must match bit for bit.
void expect_exact(const Problem& p, const Variant& v, const std::vector<CpuRun>& runs) {
  const std::string config = p.spec.name() + "_" + v.name();
  SCOPED_TRACE(config);
  const int dims = p.layout.format.head_dim;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.num_q_heads;
  const std::vector<std::uint8_t> q = query_bytes(p, v.query_dtype);
  std::vector<float> unused_out, unused_lse;
  DecodeArgs a = p.args(unused_out, unused_lse, v.splits);
  a.query = {q.data(), q.size()};
  a.query_dtype = v.query_dtype;
  a.out_dtype = v.out_dtype;
  if (v.scale != 0.0f) a.softmax_scale = v.scale;
  a.codebook = v.codebook;
  if (v.rotation) a.rotation = {v.rotation->data(), v.rotation->size() * 4};

  const auto run_one = [&](const CpuRun* run, std::vector<std::uint8_t>& out, std::vector<float>& lse) {
    out.assign(rows * dims * dtype_size(v.out_dtype), 0xa5);
    lse.assign(rows, -7.0f);
    DecodeArgs b = a;
    b.out = {out.data(), out.size()};
    b.lse = v.with_lse ? MutableBuffer{lse.data(), lse.size() * 4} : MutableBuffer{};
    return run ? decode_cpu(p.view(), b, CpuOptions{run->threads, run->isa}) : decode_reference(p.view(), b);
  };
  std::vector<std::uint8_t> want_out;
  std::vector<float> want_lse;
  ASSERT_TRUE(run_one(nullptr, want_out, want_lse).ok());
  for (const CpuRun& run : runs) {
    std::vector<std::uint8_t> got_out;
    std::vector<float> got_lse;
    const Status s = run_one(&run, got_out, got_lse);
    ASSERT_TRUE(s.ok()) << run.name() << ": " << s.to_string();
    std::int64_t bad = -1;
    if (v.out_dtype == DType::kFloat32) {
      std::vector<float> g(rows * dims), w(rows * dims);
      std::memcpy(g.data(), got_out.data(), got_out.size());
      std::memcpy(w.data(), want_out.data(), want_out.size());
      bad = testing::first_bit_difference(g, w, v.nan_equal);
      if (bad >= 0) {
        ADD_FAILURE() << run.name() << ": out[" << bad << "] (row " << bad / dims << ", dim " << bad % dims
                      << ") = " << testing::float_hex(g[bad]) << ", reference " << testing::float_hex(w[bad]);
      }
    } else {
      bad = testing::first_bit_difference(got_out, want_out);
      if (bad >= 0) ADD_FAILURE() << run.name() << ": out byte " << bad << " differs";
    }
    const std::int64_t bad_lse = testing::first_bit_difference(got_lse, want_lse, v.nan_equal);
    if (bad_lse >= 0) {
      ADD_FAILURE() << run.name() << ": lse[" << bad_lse << "] = " << testing::float_hex(got_lse[bad_lse])
                    << ", reference " << testing::float_hex(want_lse[bad_lse]);
    }
    if (bad >= 0 || bad_lse >= 0) {
      testing::dump_bytes(config + "_" + run.name(), "cache", p.cache.data(), p.cache.size());
      testing::dump_bytes(config + "_" + run.name(), "query", q.data(), q.size());
      return;
    }
  }
}

using testing::announce_seed;
using testing::GridAxes;
using testing::Shape;
using testing::shape_grid;
using testing::ShapeName;

// Full grid on short sequences: head_dim x preset x block size x GQA, each
// against every ISA x threads 1/2/3/8.
using CpuDecodeEdgeGrid = testing::ShapeTest;
TEST_P(CpuDecodeEdgeGrid, ShortSequences) {
  expect_exact(problem({0, 1, 17, 15, 16, 50}), Variant{}, all_cpu_runs());
}
INSTANTIATE_TEST_SUITE_P(Grid, CpuDecodeEdgeGrid,
                         ::testing::ValuesIn(testing::with_aos(shape_grid({.head_dims = {64, 128, 256},
                                                                           .block_sizes = {1, 16, 64},
                                                                           .groups = {1, 3, 4, 8}},
                                                                          4000),
                                                               4)),
                         ShapeName());

// Long sequences (5000 tokens: many tiles per split, blocks crossed inside
// tiles), every preset and head_dim, block size and GQA rotating; every
// fourth shape also on one split.
using CpuDecodeLongSequences = testing::ShapeTest;
TEST_P(CpuDecodeLongSequences, Exact) {
  const auto runs = all_cpu_runs();
  const Problem p = problem({5000, 17, 0, 1});
  expect_exact(p, Variant{}, runs);
  if (shape().index % 4 == 0) {
    Variant one_split;
    one_split.splits = 1;
    expect_exact(p, one_split, runs);
  }
}
INSTANTIATE_TEST_SUITE_P(Rotating, CpuDecodeLongSequences,
                         ::testing::ValuesIn(testing::with_aos(
                             testing::rotate(testing::rotate(shape_grid({.head_dims = {64, 128, 256}}, 5000),
                                                             &Shape::block_size, {1, 16, 64}),
                                             &Shape::group, {1, 3, 4, 8}),
                             3)),
                         ShapeName());

using CpuDecodeSplitCounts = testing::ShapeTest;
TEST_P(CpuDecodeSplitCounts, Exact) {
  const auto runs = all_cpu_runs({1, 2});
  const Problem p = problem({333, 1, 0, 64, 1000});
  for (int splits : {1, 2, 3, 7, 32, 100, 1024}) {
    Variant v;
    v.splits = splits;
    expect_exact(p, v, runs);
  }
}
INSTANTIATE_TEST_SUITE_P(Presets, CpuDecodeSplitCounts, ::testing::ValuesIn(testing::with_aos(shape_grid({}, 6000), 2)),
                         ShapeName());

using CpuDecodeHalfPrecision = testing::ShapeTest;
TEST_P(CpuDecodeHalfPrecision, QueriesAndOutputs) {
  const auto runs = all_cpu_runs({1, 2});
  const Problem p = problem({300, 5, 0});
  for (DType qt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (DType ot : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      Variant v;
      v.query_dtype = qt;
      v.out_dtype = ot;
      v.with_lse = ot != DType::kBFloat16;
      expect_exact(p, v, runs);
    }
  }
}
INSTANTIATE_TEST_SUITE_P(
    Presets, CpuDecodeHalfPrecision,
    ::testing::ValuesIn(testing::with_aos(
        shape_grid({.presets = {Preset::k4BitNc, Preset::kK8V4, Preset::k3BitNc}, .groups = {3}}, 7000))),
    ShapeName());

using CpuDecodeDenseRotation = testing::ShapeTest;
TEST_P(CpuDecodeDenseRotation, AndCustomCodebook) {
  const auto runs = all_cpu_runs({1, 2});
  const int dims = shape().head_dim;
  const Problem p = problem({200, 31});
  std::mt19937 rng(shape().seed);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(dims)));
  std::vector<float> rotation(static_cast<std::size_t>(dims) * dims);
  for (float& x : rotation) x = normal(rng);
  std::vector<float> centroids(std::size_t{1} << shape().format().key_bits);
  for (std::size_t i = 0; i < centroids.size(); ++i) centroids[i] = -0.4f + 0.05f * static_cast<float>(i * i) / 8;
  Codebook cb;
  ASSERT_TRUE(make_codebook(shape().format().key_bits, centroids, &cb).ok());
  Variant v;
  v.rotation = &rotation;
  expect_exact(p, v, runs);
  v.codebook = &cb;
  expect_exact(p, v, runs);
}
INSTANTIATE_TEST_SUITE_P(
    Presets, CpuDecodeDenseRotation,
    ::testing::ValuesIn(testing::with_aos(
        shape_grid({.presets = {Preset::k4BitNc, Preset::kK3V4Nc}, .head_dims = {64, 128}}, 8000), 2)),
    ShapeName());

// FP8 NaN codes (0x7f, 0xff) in keys: the exact scalar fold takes over where
// SIMD max would depend on the order; NaNs must stay NaNs (payloads may differ).
// In both layouts; e4b15 has no NaN (the same bytes read +-1.875).
TEST(CpuDecodeExact, NanFp8Codes) {
  const std::pair<LayoutKind, Fp8Format> kinds[] = {
      {LayoutKind::kSoA, Fp8Format::kE4m3}, {LayoutKind::kAoS, Fp8Format::kE4m3}, {LayoutKind::kAoS, Fp8Format::kE4b15}};
  for (const auto& [layout, fp8] : kinds) {
    ProblemSpec spec;
    spec.format = preset_format(Preset::kK8V4, 128, layout, fp8);
    spec.group = 4;
    spec.seq_lens = {100, 40};
    spec.seed = announce_seed(9000);
    Problem p = make_problem(spec);
    // A NaN code in a few keys of head 0 (key bytes of slot 3 of a few blocks).
    for (std::int64_t blk = 0; blk < p.num_blocks; blk += 3) {
      p.cache[p.layout.block_base(blk) + p.layout.key_data_offset(3, 0) + 5] = 0x7f;
      p.cache[p.layout.block_base(blk) + p.layout.key_data_offset(7, 1) + 100] = 0xff;
    }
    Variant v;
    v.nan_equal = true;
    expect_exact(p, v, all_cpu_runs({1, 2}));
  }
}

// Scores overflowing to inf and NaN, a zero or negative scale.
using CpuDecodeNonFiniteScores = testing::ShapeTest;
TEST_P(CpuDecodeNonFiniteScores, Exact) {
  const auto runs = all_cpu_runs({1, 2});
  const Problem p = problem({70, 3});
  for (float scale : {1e30f, -1e30f, 3e38f, 0.0f, -0.125f, 1e-30f}) {
    Variant v;
    v.scale = scale == 0.0f ? -0.0f : scale;  // -0 is a valid, non-default scale
    v.nan_equal = true;
    expect_exact(p, v, runs);
  }
}
INSTANTIATE_TEST_SUITE_P(Presets, CpuDecodeNonFiniteScores,
                         ::testing::ValuesIn(testing::with_aos(shape_grid({.head_dims = {64}, .groups = {3}}, 9001))),
                         ShapeName());

// More query heads per KV head than the kernels keep in registers (odd
// groups on 3-bit, even ones on 4-bit).
std::vector<Shape> large_groups() {
  std::vector<Shape> shapes =
      shape_grid({.presets = {Preset::k4BitNc}, .groups = {5, 9, 12, 20, 33}, .num_kv_heads = 1}, 10000);
  for (Shape& s : shapes) s.preset = s.group % 2 ? Preset::k3BitNc : Preset::k4BitNc;
  return testing::with_aos(shapes, 2);
}
using CpuDecodeLargeGroups = testing::ShapeTest;
TEST_P(CpuDecodeLargeGroups, Exact) {
  expect_exact(problem({150, 16}), Variant{}, all_cpu_runs({1, 3}));
}
INSTANTIATE_TEST_SUITE_P(Groups, CpuDecodeLargeGroups, ::testing::ValuesIn(large_groups()), ShapeName());

// More splits than tokens per split and many sequences: the workspace (queries
// and non-empty splits' partials, 256 MiB per chunk) is processed in chunks of
// sequences; results must not depend on where the chunks fall.
TEST(CpuDecodeExact, WorkspaceChunks) {
  ProblemSpec spec;
  spec.format = preset_format(Preset::k3BitNc, 64);
  spec.block_size = 64;
  spec.num_kv_heads = 1;
  spec.group = 8;
  spec.seq_lens.assign(110, 1024);  // 1024 one-token splits each: ~2.6 MB of partials per sequence
  spec.seq_lens[7] = 3;
  spec.seed = announce_seed(12000);
  Variant v;
  v.splits = 1024;
  expect_exact(make_problem(spec), v, all_cpu_runs({2}));
}

// threads = 0 uses the caller's arena; calls nested inside TBB tasks (which
// may run on a thread already inside decode_cpu) stay exact.
TEST(CpuDecodeExact, CallerArenaAndNestedCalls) {
  ProblemSpec spec;
  spec.seq_lens = {600, 100, 0};
  spec.seed = announce_seed(11000);
  const Problem p = make_problem(spec);
  std::vector<float> want_out, want_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse)).ok());
  tbb::task_arena arena(2);
  arena.execute([&] {
    tbb::parallel_for(0, 16, [&](int i) {
      std::vector<float> out, lse;
      const Status s = decode_cpu(p.view(), p.args(out, lse), CpuOptions{i % 3 == 0 ? 1 : 0, ""});
      EXPECT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(testing::first_bit_difference(out, want_out), -1) << "task " << i;
      EXPECT_EQ(testing::first_bit_difference(lse, want_lse), -1) << "task " << i;
    });
  });
}

}  // namespace
}  // namespace turboquant
