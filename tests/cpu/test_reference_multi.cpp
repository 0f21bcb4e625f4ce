// The golden model's multi-token rows, sinks and sliding windows
// (decode.hpp, docs/ARITHMETIC.md §7): a multi-token decode equals, bit for
// bit, the same decode written as vLLM's expanded single-token rows; it
// agrees with the float64 oracle; the sink leaves the LSE alone; and the
// backends that do not implement them (CUDA, for now) say so instead of
// ignoring them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/f64_oracle.hpp"
#include "common/multi_problem.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant {
namespace {

using testing::Combo;
using testing::combos;
using testing::make_multi_problem;
using testing::MultiProblem;
using testing::MultiSpec;
using testing::sink_values;
using testing::spec_of;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MultiTokenGrid : public ::testing::TestWithParam<int> {
 protected:
  Combo combo() const { return combos()[static_cast<std::size_t>(GetParam())]; }
  std::uint32_t seed() const { return 101 + static_cast<std::uint32_t>(GetParam()); }
};

TEST_P(MultiTokenGrid, EqualsExpandedSingleTokenRowsBitwise) {
  const Combo c = combo();
  const MultiSpec spec = spec_of(c, seed());
  SCOPED_TRACE(spec.name() + " splits " + std::to_string(c.splits));
  std::printf("seed %u: %s\n", seed(), spec.name().c_str());
  const MultiProblem m = make_multi_problem(spec);
  std::vector<float> out, lse, ex_out, ex_lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(out, lse, c.splits)).ok());
  const Status s = decode_reference(m.p.view(), m.expanded_args(ex_out, ex_lse, c.splits));
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(same_bits(out, ex_out));
  EXPECT_TRUE(same_bits(lse, ex_lse));
}

TEST_P(MultiTokenGrid, AgainstFloat64Oracle) {
  const Combo c = combo();
  const MultiSpec spec = spec_of(c, seed());
  SCOPED_TRACE(spec.name() + " splits " + std::to_string(c.splits));
  const MultiProblem m = make_multi_problem(spec);
  std::vector<float> out, lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(out, lse, c.splits)).ok());
  testing::OracleInput in{m.p.layout, m.p.cache.data(), m.p.batch, m.p.num_q_heads, m.p.max_blocks,
                          m.p.block_table.data(), m.p.seq_lens.data(), m.query.data(), m.p.scale};
  in.query_start_loc = m.query_start_loc.data();
  in.sinks = m.sinks.empty() ? nullptr : m.sinks.data();
  in.sliding_window = m.window;
  std::vector<double> want, want_lse;
  testing::f64_attention(in, want, want_lse);
  EXPECT_LE(testing::rel_l2(out, want), 1e-5);
  for (std::size_t i = 0; i < lse.size(); ++i) {
    EXPECT_NEAR(lse[i], want_lse[i], 1e-4 + 1e-6 * std::fabs(want_lse[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, MultiTokenGrid, ::testing::Range(0, static_cast<int>(combos().size())));

MultiProblem small_multi(std::vector<float> sinks = {}, int window = 0) {
  MultiSpec spec;
  spec.base.seq_lens = {5, 40, 1};
  spec.base.seed = 3;
  spec.q_lens = {2, 3, 1};
  spec.sinks = std::move(sinks);
  spec.window = window;
  return make_multi_problem(spec);
}

// The sink changes the output, never the LSE (§7: the LSE of the attended scores).
TEST(ReferenceMultiToken, SinksLeaveTheLseAlone) {
  const MultiProblem plain = small_multi();
  const MultiProblem sunk = small_multi(sink_values(8, 0));
  std::vector<float> out, lse, s_out, s_lse;
  ASSERT_TRUE(decode_reference(plain.p.view(), plain.args(out, lse)).ok());
  ASSERT_TRUE(decode_reference(sunk.p.view(), sunk.args(s_out, s_lse)).ok());
  EXPECT_TRUE(same_bits(lse, s_lse));
  EXPECT_FALSE(same_bits(out, s_out));
  // Head 0 has sink -1e4: its weight is exactly 0, so its rows keep their bits.
  const int dims = 128;
  for (int r = 0; r < sunk.rows; ++r) {
    EXPECT_EQ(std::memcmp(&out[std::size_t(r) * 8 * dims], &s_out[std::size_t(r) * 8 * dims], dims * 4), 0) << r;
  }
  // Head 6 has sink 1e4: every token's weight is 0, the output row is +0.
  for (int r = 0; r < sunk.rows; ++r) {
    for (int d = 0; d < dims; ++d) EXPECT_EQ(s_out[(std::size_t(r) * 8 + 6) * dims + d], 0.0f);
  }
}

// query_start_loc [0, 1, ..., B] is the single-token call, and a window at
// least as long as every row's prefix is no window: the same bits.
TEST(ReferenceMultiToken, OneTokenPerSequenceAndLongWindowsAreThePlainCall) {
  const auto p = testing::make_problem({37, 1, 300, 16}, 5);
  std::vector<float> out, lse, m_out, m_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(out, lse)).ok());
  const std::vector<std::int32_t> starts{0, 1, 2, 3, 4};
  DecodeArgs a = p.args(m_out, m_lse);
  a.query_start_loc = testing::bytes_of(starts);
  a.num_query_rows = 4;
  ASSERT_TRUE(decode_reference(p.view(), a).ok());
  EXPECT_TRUE(same_bits(out, m_out));
  EXPECT_TRUE(same_bits(lse, m_lse));
  a = p.args(m_out, m_lse);
  a.sliding_window = 300;
  ASSERT_TRUE(decode_reference(p.view(), a).ok());
  EXPECT_TRUE(same_bits(out, m_out));
  a.sliding_window = 299;  // the 300-token row now drops its first token
  ASSERT_TRUE(decode_reference(p.view(), a).ok());
  EXPECT_FALSE(same_bits(out, m_out));
}

// q_len 0 (vLLM's CUDA-graph padding): the sequence owns no row, the others are unchanged.
TEST(ReferenceMultiToken, EmptyQueryRunsOwnNoRow) {
  const MultiProblem m = small_multi(sink_values(8, 1), 9);
  std::vector<float> out, lse;
  ASSERT_TRUE(decode_reference(m.p.view(), m.args(out, lse)).ok());
  // Sequence 1 (q_len 3) padded out: rows of sequences 0 and 2 only, same bits.
  MultiProblem padded = m;
  padded.query_start_loc = {0, 2, 2, 3};
  padded.rows = 3;
  padded.query.erase(padded.query.begin() + 2 * 8 * 128, padded.query.begin() + 5 * 8 * 128);
  std::vector<float> p_out, p_lse;
  const Status s = decode_reference(padded.p.view(), padded.args(p_out, p_lse));
  ASSERT_TRUE(s.ok()) << s.to_string();
  const std::size_t row = 8 * 128;
  EXPECT_EQ(std::memcmp(p_out.data(), out.data(), 2 * row * 4), 0);
  EXPECT_EQ(std::memcmp(&p_out[2 * row], &out[5 * row], row * 4), 0);
  EXPECT_EQ(std::memcmp(&p_lse[16], &lse[40], 8 * 4), 0);
}

// ---- bad input: every new check names the entry, nothing is written ---------

struct BadCase {
  std::string what;
  std::function<void(DecodeArgs&, std::vector<std::int32_t>&, std::vector<float>&)> damage;
  StatusCode code;
  std::string text;
};

TEST(ReferenceMultiToken, BadInputIsNamedAndNothingIsWritten) {
  const MultiProblem m = small_multi(sink_values(8, 2), 0);
  std::vector<std::int32_t> seq_lens_copy = m.p.seq_lens;
  const std::vector<BadCase> cases = {
      {"start", [](DecodeArgs&, auto& q, auto&) { q[0] = 1; }, StatusCode::kInvalidArgument,
       "query_start_loc[0] = 1: must be 0"},
      {"decreasing", [](DecodeArgs&, auto& q, auto&) { q = {0, 3, 2, 6}; }, StatusCode::kInvalidArgument,
       "query_start_loc[2] = 2 < query_start_loc[1] = 3: must not decrease"},
      {"end", [](DecodeArgs&, auto& q, auto&) { q[3] = 5; }, StatusCode::kInvalidArgument,
       "query_start_loc[3] = 5: must equal num_query_rows = 6"},
      {"q_len > seq_len", [](DecodeArgs&, auto& q, auto&) { q = {0, 2, 3, 6}; }, StatusCode::kInvalidArgument,
       "query_start_loc[3] = 6: q_len of sequence 2 = 3 exceeds seq_lens[2] = 1 (the query tokens are part of the "
       "sequence)"},
      {"short query_start_loc", [](DecodeArgs& a, auto&, auto&) { a.query_start_loc.bytes = 12; },
       StatusCode::kBufferTooSmall, "query_start_loc has 12 bytes but [4] int32 needs 16"},
      {"rows without query_start_loc",
       [](DecodeArgs& a, auto&, auto&) { a.query_start_loc = {}; }, StatusCode::kInvalidArgument,
       "num_query_rows = 6 but query_start_loc is empty: must be 0 or batch = 3"},
      {"negative rows", [](DecodeArgs& a, auto&, auto&) { a.num_query_rows = -1; }, StatusCode::kInvalidArgument,
       "num_query_rows = -1: must be in [0, batch x 128 = 384]"},
      {"query sized by T", [](DecodeArgs& a, auto&, auto&) { a.query.bytes -= 4; }, StatusCode::kBufferTooSmall,
       "query has 24572 bytes but [6, 8, 128] float32 needs 24576"},
      {"lse sized by T", [](DecodeArgs& a, auto&, auto&) { a.lse.bytes = 4 * 8 * 5; }, StatusCode::kBufferTooSmall,
       "lse has 160 bytes but [6, 8] float32 needs 192"},
      {"nan sink", [](DecodeArgs&, auto&, auto& s) { s[3] = NAN; }, StatusCode::kNonFinite,
       "sinks[3] = nan is not finite"},
      {"inf sink", [](DecodeArgs&, auto&, auto& s) { s[7] = -INFINITY; }, StatusCode::kNonFinite,
       "sinks[7] = -inf is not finite"},
      {"huge sink", [](DecodeArgs&, auto&, auto& s) { s[1] = 3e38f; }, StatusCode::kNonFinite,
       ": sinks * log2(e) overflows float32"},
      {"short sinks", [](DecodeArgs& a, auto&, auto&) { a.sinks.bytes = 28; }, StatusCode::kBufferTooSmall,
       "sinks has 28 bytes but [8] float32 needs 32"},
      {"negative window", [](DecodeArgs& a, auto&, auto&) { a.sliding_window = -1; }, StatusCode::kInvalidArgument,
       "sliding_window = -1: must be >= 0 (0: unlimited)"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::int32_t> starts = m.query_start_loc;
    std::vector<float> sinks = m.sinks, out, lse;
    DecodeArgs a = m.args(out, lse);
    c.damage(a, starts, sinks);
    if (a.query_start_loc.data != nullptr) a.query_start_loc.data = starts.data();
    if (a.sinks.data != nullptr) a.sinks.data = sinks.data();
    const Status s = decode_reference(m.p.view(), a);
    EXPECT_EQ(s.code(), c.code) << s.to_string();
    EXPECT_NE(s.message().find(c.text), std::string::npos) << s.message();
    for (float x : out) ASSERT_EQ(x, -7.0f);
    for (float x : lse) ASSERT_EQ(x, -7.0f);
  }
  {
    // q_len 129 (the buffers sized for its 130 rows).
    MultiProblem big = m;
    big.query_start_loc = {0, 0, 129, 130};
    big.rows = 130;
    big.query.assign(std::size_t(130) * 8 * 128, 0.5f);
    std::vector<float> out, lse;
    const Status s = decode_reference(big.p.view(), big.args(out, lse));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "query_start_loc[2] = 129: q_len of sequence 1 = 129 exceeds 128");
    for (float x : out) ASSERT_EQ(x, -7.0f);
  }
  // A non-finite query element is named by its row.
  MultiProblem bad = m;
  bad.query[(4 * 8 + 2) * 128 + 5] = INFINITY;
  std::vector<float> out, lse;
  const Status s = decode_reference(bad.p.view(), bad.args(out, lse));
  EXPECT_EQ(s.code(), StatusCode::kNonFinite);
  EXPECT_NE(s.message().find("query[4][2][5] = inf is not finite (query row 4, head 2, dim 5)"), std::string::npos)
      << s.message();
}

// ---- every backend decodes them or says it cannot ---------------------------

// Every exact backend reproduces the golden bits: the CPU ones (their grid:
// test_cpu_multi_exact.cpp) and cuda:strict; cuda:fast is within 1e-3 (its
// grid, and strict's: tests/gpu/test_gpu_multi.cpp).
TEST(ReferenceMultiToken, EveryBackendDecodesThemWithTheGoldenBits) {
  MultiProblem with_rows = small_multi();
  const auto single = testing::make_problem({37, 5}, 9);
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<float> out, lse, want, want_lse;
    DecodeArgs a;
    std::vector<float> sinks(8, 1.0f);
    std::string given;
    if (variant == 0) {
      a = with_rows.args(out, lse);
      given = "query_start_loc";
    } else {
      a = single.args(out, lse);
      if (variant == 1) {
        a.sinks = testing::bytes_of(sinks);
        given = "sinks";
      } else {
        a.sliding_window = 16;
        given = "sliding_window = 16";
      }
    }
    const ConstCacheView view = variant == 0 ? with_rows.p.view() : single.view();
    SCOPED_TRACE(given);
    ASSERT_TRUE(decode_reference(view, a).ok());
    want = out;
    want_lse = lse;
    for (const Backend* b : backends()) {
      if (!b->status().ok()) continue;  // unbuilt or no device: says so itself
      SCOPED_TRACE(std::string(b->name()));
      std::fill(out.begin(), out.end(), -7.0f);
      std::fill(lse.begin(), lse.end(), -7.0f);
      EXPECT_TRUE(b->supports(view, a).ok());
      const Status s = b->decode(view, a, BackendOptions{.threads = 2});
      ASSERT_TRUE(s.ok()) << s.to_string();
      if (b->exact_decode()) {
        EXPECT_TRUE(same_bits(out, want));
        EXPECT_TRUE(same_bits(lse, want_lse));
      } else {
        EXPECT_LE(testing::rel_l2(out, want), 1e-3);
        for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(lse[i], want_lse[i], 1e-2) << "head row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace turboquant
