// Block tables that repeat blocks (within a sequence, across sequences: prefix
// sharing) decode exactly like a cache where every table entry has its own
// physical copy of the block, on every backend, and match float64.
#include <gtest/gtest.h>

#include <random>

#include "common/shape_grid.hpp"
#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

// Every preset x block sizes 1, 16, 32 (one seed for all: TQ_SEED replays);
// AoS on half of them (with_aos).
using BlockTablesRepeated = tqt::ShapeTest;
TEST_P(BlockTablesRepeated, EqualMaterializedCopies) {
  const std::uint32_t s = seed(41);
  const int bs = shape().block_size;
  tqt::ProblemSpec spec = shape().spec({3 * bs + 1});
  spec.seed = s;
  spec.extra_blocks = 2;
  const tqt::Problem p = tqt::make_problem(spec);
  const BlockLayout& l = p.layout;
  // Three sequences over the problem's blocks: repeats within a row, a
  // shared prefix, one block used everywhere.
  const int mb = 6;
  const std::int32_t b0 = p.block_table[0], b1 = p.block_table[1], b2 = p.block_table[2];
  const std::vector<std::int32_t> shared_table = {b0, b0, b1, b0, b2, b0,   //
                                                  b0, b1, b2, b2, b2, b1,   //
                                                  b2, b2, b2, b2, b2, b2};
  const std::vector<std::int32_t> lens = {6 * bs, 5 * bs - 1, 6 * bs};
  // The same sequences, every entry its own physical copy.
  const std::int64_t copies = static_cast<std::int64_t>(shared_table.size());
  std::vector<std::uint8_t> flat(static_cast<std::size_t>(copies * l.block_bytes()));
  std::vector<std::int32_t> flat_table(shared_table.size());
  for (std::int64_t i = 0; i < copies; ++i) {
    std::memcpy(flat.data() + i * l.block_bytes(), p.cache.data() + l.block_base(shared_table[i]), l.block_bytes());
    flat_table[i] = static_cast<std::int32_t>(copies - 1 - i);  // reversed placement
  }
  std::vector<std::uint8_t> placed(flat.size());
  for (std::int64_t i = 0; i < copies; ++i) {
    std::memcpy(placed.data() + flat_table[i] * l.block_bytes(), flat.data() + i * l.block_bytes(), l.block_bytes());
  }
  std::vector<float> query(3 * 4 * 64);
  std::mt19937 rng(s);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& q : query) q = n(rng);

  const auto run = [&](const DecodeBackend& be, const ConstCacheView& view, const std::vector<std::int32_t>& table,
                       std::vector<float>& out, std::vector<float>& lse) {
    out.assign(query.size(), -7.0f);
    lse.assign(12, -7.0f);
    const DecodeArgs a = tqt::host_decode_args(tqt::bytes_of(query), 3, 4, tqt::bytes_of(table), mb,
                                               tqt::bytes_of(lens), 0.125f, 5, tqt::writable_bytes_of(out), tqt::writable_bytes_of(lse));
    EXPECT_TRUE(be.decode(view, a).ok()) << be.name;
    return a;
  };
  for (const DecodeBackend& be : decode_backends()) {
    std::vector<float> out_shared, lse_shared, out_flat, lse_flat;
    const DecodeArgs a = run(be, p.view(), shared_table, out_shared, lse_shared);
    run(be, ConstCacheView(l, placed.data(), copies), flat_table, out_flat, lse_flat);
    const std::string what = shape().name() + " " + be.name;
    EXPECT_TRUE(bits_equal(out_shared, out_flat)) << what;
    EXPECT_TRUE(bits_equal(lse_shared, lse_flat)) << what;
    std::vector<double> out64, lse64;
    tqt::f64_attention(oracle_input(p.view(), a), out64, lse64);
    const Error64 e = compare64(out_shared, lse_shared, out64, lse64);
    EXPECT_LE(e.out_rel, 1e-5) << what;
    EXPECT_LE(e.lse_abs, 1e-5) << what;
  }
}
INSTANTIATE_TEST_SUITE_P(Presets, BlockTablesRepeated,
                         ::testing::ValuesIn(tqt::with_aos(
                             tqt::shape_grid({.head_dims = {64}, .block_sizes = {1, 16, 32}, .groups = {2}}, 41), 2)),
                         tqt::ShapeName());

TEST(BlockTables, EntriesPastTheSequenceEndAreNeverRead) {
  // Only the first ceil(seq_len / block_size) entries of a row are validated
  // and read: the rest may hold anything (vLLM leaves stale ids there).
  const tqt::Problem p = tqt::make_problem({20, 0}, seed(42));
  std::vector<std::int32_t> table = p.block_table;
  for (int j = 2; j < p.max_blocks; ++j) table[j] = INT32_MIN + j;
  for (int j = 0; j < p.max_blocks; ++j) table[p.max_blocks + j] = -1;  // the empty sequence's row
  std::vector<float> out_ref, lse_ref;
  ASSERT_TRUE(decode_reference(p.view(), p.args(out_ref, lse_ref)).ok());
  for (const DecodeBackend& be : decode_backends()) {
    std::vector<float> out, lse;
    DecodeArgs a = p.args(out, lse);
    a.block_table = tqt::bytes_of(table);
    ASSERT_TRUE(be.decode(p.view(), a).ok()) << be.name;
    EXPECT_TRUE(bits_equal(out, out_ref)) << be.name;
    EXPECT_TRUE(bits_equal(lse, lse_ref)) << be.name;
  }
}

}  // namespace
}  // namespace tq_rel
