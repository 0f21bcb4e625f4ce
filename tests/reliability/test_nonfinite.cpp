// NaN and Inf in queries, keys and values. Default: rejected with kNonFinite,
// the message naming the tensor, the element and its (sequence or token,
// head, dim); nothing written. Opt-out (check_finite = false): the call runs,
// only the affected rows differ, and nothing outside the call's buffers or
// slots is touched. Every test runs both layouts.
#include <gtest/gtest.h>

#include <limits>

#include "reliability/reliability_util.hpp"
#include "turboquant/detail/elements.hpp"

namespace tq_rel {
namespace {

const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()};

constexpr LayoutKind kLayouts[] = {LayoutKind::kSoA, LayoutKind::kAoS};

tqt::Problem small_problem(std::uint32_t s, LayoutKind layout) {
  tqt::ProblemSpec spec;
  spec.format = core::preset_format(Preset::k4BitNc, 64, layout);
  spec.num_kv_heads = 2;
  spec.group = 3;
  spec.seq_lens = {9, 40, 0};
  spec.seed = s;
  return tqt::make_problem(spec);
}

// Query converted to `t`; element (b, hq, d) set to `bad`.
std::vector<std::uint8_t> query_as(const tqt::Problem& p, DType t, int b, int hq, int d, float bad) {
  const int dims = p.layout.format.head_dim;
  std::vector<std::uint8_t> q(p.query.size() * dtype_size(t));
  for (std::size_t i = 0; i < p.query.size(); ++i) detail::store_element(q.data(), t, std::int64_t(i), p.query[i]);
  detail::store_element(q.data(), t, (std::int64_t{b} * p.num_q_heads + hq) * dims + d, bad);
  return q;
}

TEST(NonFinite, QueryIsRejectedNamingSequenceHeadAndDim) {
  const std::uint32_t s0 = seed(11);
  for (LayoutKind layout : kLayouts) {
    const tqt::Problem p = small_problem(s0, layout);
    for (const DecodeBackend& be : decode_backends()) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        for (float bad : kBad) {
          const int b = 1, hq = 4, d = 63;
          const std::vector<std::uint8_t> q = query_as(p, t, b, hq, d, bad);
          std::vector<float> out, lse;
          DecodeArgs a = p.args(out, lse);
          a.query = {q.data(), q.size()};
          a.query_dtype = t;
          Guarded g_out(out.size() * 4), g_lse(lse.size() * 4);
          a.out = g_out.buffer();
          a.lse = g_lse.buffer();
          const Status s = be.decode(p.view(), a);
          SCOPED_TRACE(be.name + " " + layout_name(layout) + " " + dtype_name(t) + " " + std::to_string(bad));
          EXPECT_EQ(s.code(), StatusCode::kNonFinite) << s.to_string();
          EXPECT_NE(s.message().find("query[1][4][63]"), std::string::npos) << s.message();
          EXPECT_NE(s.message().find("(sequence 1, head 4, dim 63)"), std::string::npos) << s.message();
          EXPECT_NE(s.message().find(std::isnan(bad) ? "nan" : "inf"), std::string::npos) << s.message();
          for (std::size_t i = 0; i < g_out.size(); ++i) ASSERT_EQ(g_out.data()[i], 0xA5) << "out written on error";
          for (std::size_t i = 0; i < g_lse.size(); ++i) ASSERT_EQ(g_lse.data()[i], 0xA5) << "lse written on error";
          EXPECT_EQ(g_out.damage(), "");
          EXPECT_EQ(g_lse.damage(), "");
        }
      }
    }
  }
}

TEST(NonFinite, QueryOptOutRunsAndOnlyTheAffectedRowChanges) {
  const std::uint32_t s0 = seed(12);
  for (LayoutKind layout : kLayouts) {
    const tqt::Problem p = small_problem(s0, layout);
    const int dims = p.layout.format.head_dim;
    std::vector<float> clean_out, clean_lse;
    ASSERT_TRUE(decode_reference(p.view(), p.args(clean_out, clean_lse)).ok());
    for (const DecodeBackend& be : decode_backends()) {
      for (float bad : kBad) {
        const int b = 1, hq = 2;
        std::vector<float> q = p.query;
        q[(std::int64_t{b} * p.num_q_heads + hq) * dims + 5] = bad;
        std::vector<float> out, lse;
        DecodeArgs a = p.args(out, lse);
        a.query = {q.data(), q.size() * 4};
        a.check_finite = false;
        ASSERT_TRUE(be.decode(p.view(), a).ok()) << be.name;
        const std::size_t row = std::size_t(b) * p.num_q_heads + hq;
        for (std::size_t r = 0; r < lse.size(); ++r) {
          const bool same = std::memcmp(&out[r * dims], &clean_out[r * dims], dims * 4) == 0 &&
                            std::memcmp(&lse[r], &clean_lse[r], 4) == 0;
          if (r == row) {
            EXPECT_FALSE(same) << be.name << ": the non-finite query row should not decode like the clean one";
          } else {
            EXPECT_TRUE(same) << be.name << " " << layout_name(layout) << ": row " << r
                              << " changed although its query is clean";
          }
        }
      }
    }
  }
}

struct EncodeCase {
  explicit EncodeCase(LayoutKind layout) : p(small_problem(seed(13), layout)) {}
  tqt::Problem p;
  std::int64_t tokens() const { return static_cast<std::int64_t>(p.slots.size()); }
  EncodeArgs args(const void* keys, const void* values, DType t) const {
    EncodeArgs e;
    const std::size_t bytes = p.keys.size() * dtype_size(t);
    e.keys = {keys, bytes};
    e.values = {values, bytes};
    e.dtype = t;
    e.num_tokens = tokens();
    e.slot_mapping = {p.slots.data(), p.slots.size() * 8};
    return e;
  }
};

std::vector<std::uint8_t> as_dtype(const std::vector<float>& v, DType t) {
  std::vector<std::uint8_t> out(v.size() * dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) detail::store_element(out.data(), t, std::int64_t(i), v[i]);
  return out;
}

TEST(NonFinite, KeysAndValuesAreRejectedNamingTokenHeadAndDim) {
  for (LayoutKind layout : kLayouts) {
    const EncodeCase c(layout);
    const int dims = c.p.layout.format.head_dim, hk = c.p.layout.num_kv_heads;
    const int token = 17, head = 1, dim = 40;
    for (const EncodeBackend& be : encode_backends()) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        for (bool in_keys : {true, false}) {
          for (float bad : kBad) {
            std::vector<float> k = c.p.keys, v = c.p.values;
            (in_keys ? k : v)[(std::int64_t{token} * hk + head) * dims + dim] = bad;
            const auto kb = as_dtype(k, t), vb = as_dtype(v, t);
            std::vector<std::uint8_t> cache = c.p.cache;
            const Status s = be.encode(CacheView{c.p.layout, cache.data(), c.p.num_blocks}, c.args(kb.data(), vb.data(), t));
            SCOPED_TRACE(be.name + " " + layout_name(layout) + " " + dtype_name(t) + (in_keys ? " keys " : " values ") +
                         std::to_string(bad));
            EXPECT_EQ(s.code(), StatusCode::kNonFinite) << s.to_string();
            const std::string where = std::string(in_keys ? "keys" : "values") + "[17][1][40]";
            EXPECT_NE(s.message().find(where), std::string::npos) << s.message();
            EXPECT_NE(s.message().find("(token 17, head 1, dim 40)"), std::string::npos) << s.message();
            EXPECT_TRUE(cache == c.p.cache) << "cache written on error";
          }
        }
      }
    }
  }
}

TEST(NonFinite, PaddingRowsMayHoldNonFiniteValues) {
  // vLLM pads a batch with slot -1; those rows are never stored, so their
  // contents do not matter.
  for (LayoutKind layout : kLayouts) {
    const EncodeCase c(layout);
    std::vector<float> k = c.p.keys, v = c.p.values;
    std::vector<std::int64_t> slots = c.p.slots;
    slots[3] = -1;
    const int row = c.p.layout.num_kv_heads * c.p.layout.format.head_dim;
    for (int i = 0; i < row; ++i) k[3 * row + i] = v[3 * row + i] = std::numeric_limits<float>::quiet_NaN();
    for (const EncodeBackend& be : encode_backends()) {
      std::vector<std::uint8_t> cache = c.p.cache;
      EncodeArgs e = c.args(k.data(), v.data(), DType::kFloat32);
      e.slot_mapping = {slots.data(), slots.size() * 8};
      EXPECT_TRUE(be.encode(CacheView{c.p.layout, cache.data(), c.p.num_blocks}, e).ok()) << be.name;
    }
  }
}

TEST(NonFinite, EncodeOptOutWritesOnlyItsSlotsAndBackendsAgree) {
  for (LayoutKind layout : kLayouts) {
    const EncodeCase c(layout);
    std::vector<float> k = c.p.keys, v = c.p.values;
    const int row = c.p.layout.num_kv_heads * c.p.layout.format.head_dim;
    k[5 * row + 7] = std::numeric_limits<float>::quiet_NaN();
    v[6 * row + 1] = std::numeric_limits<float>::infinity();
    k[8 * row + 2] = -std::numeric_limits<float>::infinity();
    std::vector<std::uint8_t> first;
    for (const EncodeBackend& be : encode_backends()) {
      std::vector<std::uint8_t> cache(c.p.cache.size());
      for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<std::uint8_t>(i * 7 + 3);
      const std::vector<std::uint8_t> before = cache;
      EncodeArgs e = c.args(k.data(), v.data(), DType::kFloat32);
      e.check_finite = false;
      ASSERT_TRUE(be.encode(CacheView{c.p.layout, cache.data(), c.p.num_blocks}, e).ok()) << be.name;
      const std::vector<std::uint8_t> mask = tqt::oracle_slot_mask(c.p.layout, c.p.num_blocks, c.p.slots);
      for (std::size_t i = 0; i < cache.size(); ++i) {
        if (!mask[i]) {
          ASSERT_EQ(cache[i], before[i]) << be.name << " " << layout_name(layout) << ": byte " << i
                                         << " outside the stored slots changed";
        }
      }
      if (first.empty()) {
        first = cache;
      } else {
        EXPECT_TRUE(first == cache) << be.name << " " << layout_name(layout)
                                    << " wrote other bytes than the reference for non-finite rows";
      }
    }
  }
}

}  // namespace
}  // namespace tq_rel
