// Bad input: a Status naming the argument and the value, and nothing written
// (output, LSE and cache bytes keep their canaries).
#include <gtest/gtest.h>

#include <cstring>

#include "common/random_problem.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant {
namespace {

using testing::make_problem;
using testing::ProblemSpec;

struct DecodeFixture : ::testing::Test {
  testing::Problem p = make_problem([] {
    ProblemSpec s;
    s.seq_lens = {20, 33};
    return s;
  }());
  std::vector<float> out, lse;
  DecodeArgs args = p.args(out, lse);

  // Runs decode and checks it failed with `code`, a message containing
  // `needle`, and left every output element at its canary value.
  void expect_rejected(const DecodeArgs& a, StatusCode code, const std::string& needle,
                       const ConstCacheView* view = nullptr) {
    const Status s = decode_reference(view ? *view : p.view(), a);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message() << "\nwanted: " << needle;
    for (float v : out) ASSERT_EQ(v, -7.0f);
    for (float v : lse) ASSERT_EQ(v, -7.0f);
  }
};

TEST_F(DecodeFixture, AcceptsTheBaseline) { EXPECT_TRUE(decode_reference(p.view(), args).ok()); }

TEST_F(DecodeFixture, RejectsShapeErrors) {
  DecodeArgs a = args;
  a.num_q_heads = 7;
  expect_rejected(a, StatusCode::kInvalidArgument, "num_q_heads = 7 is not a multiple of num_kv_heads = 2");
  a = args;
  a.batch = -1;
  expect_rejected(a, StatusCode::kInvalidArgument, "batch = -1");
  a = args;
  a.num_splits = 0;
  expect_rejected(a, StatusCode::kInvalidArgument, "num_splits = 0");
}

TEST_F(DecodeFixture, RejectsNonFiniteScaleAndQuery) {
  DecodeArgs a = args;
  a.softmax_scale = std::nanf("");
  expect_rejected(a, StatusCode::kNonFinite, "softmax_scale");
  a.softmax_scale = INFINITY;
  expect_rejected(a, StatusCode::kNonFinite, "softmax_scale = inf");
  std::vector<float> q = p.query;
  q[1 * 8 * 128 + 5 * 128 + 77] = INFINITY;
  a = args;
  a.query = {q.data(), q.size() * 4};
  expect_rejected(a, StatusCode::kNonFinite, "query[1][5][77]");
  a.check_finite = false;  // the caller's opt-out
  EXPECT_TRUE(decode_reference(p.view(), a).ok());
}

TEST_F(DecodeFixture, RejectsTableAndLengthErrors) {
  std::vector<std::int32_t> table = p.block_table;
  table[1 * p.max_blocks + 2] = static_cast<std::int32_t>(p.num_blocks) + 5;
  DecodeArgs a = args;
  a.block_table = {table.data(), table.size() * 4};
  expect_rejected(a, StatusCode::kOutOfRange,
                  "block_table[1][2] = " + std::to_string(p.num_blocks + 5) + " is outside [0, " +
                      std::to_string(p.num_blocks) + ")");
  table[1 * p.max_blocks + 2] = -1;
  expect_rejected(a, StatusCode::kOutOfRange, "block_table[1][2] = -1");

  std::vector<std::int32_t> lens = {20, 16 * p.max_blocks + 1};
  a = args;
  a.seq_lens = {lens.data(), lens.size() * 4};
  expect_rejected(a, StatusCode::kOutOfRange, "seq_lens[1] = " + std::to_string(lens[1]));
  lens = {-3, 1};
  expect_rejected(a, StatusCode::kInvalidArgument, "seq_lens[0] = -3");
}

TEST_F(DecodeFixture, RejectsNullAndUndersizedBuffers) {
  // Each row changes one buffer of the baseline arguments.
  const struct {
    void (*change)(DecodeArgs&);
    const char* needle;
  } rows[] = {
      {[](DecodeArgs& a) { a.query.bytes -= 4; }, "query has"},
      {[](DecodeArgs& a) { a.query.data = nullptr; }, "query is null"},
      {[](DecodeArgs& a) { a.out.bytes = 10; }, "out has 10 bytes"},
      {[](DecodeArgs& a) { a.lse.bytes = 4; }, "lse has 4 bytes"},
      {[](DecodeArgs& a) { a.block_table.data = nullptr; }, "block_table is null"},
      {[](DecodeArgs& a) { a.seq_lens.bytes = 4; }, "seq_lens has 4 bytes"},
  };
  for (const auto& row : rows) {
    DecodeArgs a = args;
    row.change(a);
    expect_rejected(a, StatusCode::kBufferTooSmall, row.needle);
  }
  ConstCacheView null_cache(p.layout, nullptr, p.num_blocks);
  expect_rejected(args, StatusCode::kBufferTooSmall, "cache.data is null", &null_cache);
}

TEST_F(DecodeFixture, RejectsBadLayouts) {
  ConstCacheView v = p.view();
  v.layout.block_size = 0;
  expect_rejected(args, StatusCode::kInvalidArgument, "block_size = 0", &v);
  v = p.view();
  v.layout.format.head_dim = 96;
  expect_rejected(args, StatusCode::kInvalidArgument, "head_dim = 96", &v);
  v = p.view();
  v.layout.format.key_bits = 5;
  expect_rejected(args, StatusCode::kInvalidArgument, "key_bits = 5", &v);
}

TEST_F(DecodeFixture, RejectsMismatchedCodebook) {
  const Codebook& cb3 = vllm_codebook(128, 3);
  DecodeArgs a = args;
  a.codebook = &cb3;
  expect_rejected(a, StatusCode::kInvalidArgument, "codebook has 3 bits");
}

struct EncodeFixture : ::testing::Test {
  testing::Problem p = make_problem([] {
    ProblemSpec s;
    s.seq_lens = {20};
    return s;
  }());
  std::vector<std::uint8_t> cache = p.cache;  // encoded: any write would change it
  EncodeArgs args = p.encode_args();

  void expect_rejected(const EncodeArgs& a, StatusCode code, const std::string& needle) {
    std::vector<std::uint8_t> before(cache.size(), 0xA5);
    std::vector<std::uint8_t> work = before;
    const Status s = encode_reference(CacheView{p.layout, work.data(), p.num_blocks}, a);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message() << "\nwanted: " << needle;
    EXPECT_EQ(work, before) << "a rejected encode wrote into the cache";
  }
};

TEST_F(EncodeFixture, RejectsBadSlots) {
  std::vector<std::int64_t> slots = p.slots;
  slots[4] = p.num_blocks * 16;
  EncodeArgs a = args;
  a.slot_mapping = {slots.data(), slots.size() * 8};
  expect_rejected(a, StatusCode::kOutOfRange, "slot_mapping[4] = " + std::to_string(p.num_blocks * 16));
  slots[4] = slots[5];
  expect_rejected(a, StatusCode::kInvalidArgument, "more than once");
}

TEST_F(EncodeFixture, RejectsNonFiniteAndShortBuffers) {
  std::vector<float> k = p.keys;
  k[(3 * 2 + 1) * 128 + 9] = NAN;
  EncodeArgs a = args;
  a.keys = {k.data(), k.size() * 4};
  expect_rejected(a, StatusCode::kNonFinite, "keys[3][1][9]");
  a = args;
  a.values.bytes -= 2;
  expect_rejected(a, StatusCode::kBufferTooSmall, "values has");
  a = args;
  a.num_tokens = -2;
  expect_rejected(a, StatusCode::kInvalidArgument, "num_tokens = -2");
}

TEST_F(EncodeFixture, NegativeSlotsAreSkippedAndOnlyNamedSlotsWritten) {
  std::vector<std::int64_t> slots(p.slots.size(), -1);
  slots[3] = p.slots[3];
  EncodeArgs a = args;
  a.slot_mapping = {slots.data(), slots.size() * 8};
  std::vector<std::uint8_t> work(cache.size(), 0xA5);
  ASSERT_TRUE(encode_reference(CacheView{p.layout, work.data(), p.num_blocks}, a).ok());
  // Exactly the bytes of slot 3's records and metadata may differ from the canary.
  std::vector<bool> allowed(work.size(), false);
  const std::int64_t base = p.layout.block_base(slots[3] / 16);
  const int t = static_cast<int>(slots[3] % 16);
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < p.layout.format.data_bytes(); ++i) allowed[base + p.layout.key_data_offset(t, h) + i] = true;
    for (MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
      allowed[base + p.layout.meta_field_offset(t, h, m)] = allowed[base + p.layout.meta_field_offset(t, h, m) + 1] = true;
    }
  }
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (!allowed[i]) {
      ASSERT_EQ(work[i], 0xA5) << "byte " << i << " outside slot " << slots[3] << " was written";
    }
  }
  // And those bytes equal the full encode's.
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (allowed[i]) {
      ASSERT_EQ(work[i], cache[i]) << i;
    }
  }
}

TEST(EncodeExtremes, HugeMagnitudesClampMetadataNotInf) {
  // gh-53334: a -125,000 attention sink and 1e6 magnitudes must not store inf.
  const BlockLayout l{preset_format(Preset::k4BitNc, 128), 16, 1};
  std::vector<std::uint8_t> cache(l.block_bytes(), 0);
  std::vector<float> k(128, 1e6f), v(128, 3.0f);
  v[0] = -125000.0f;
  k[1] = -1e6f;
  std::int64_t slot = 0;
  EncodeArgs e;
  e.keys = {k.data(), 512};
  e.values = {v.data(), 512};
  e.num_tokens = 1;
  e.slot_mapping = {&slot, 8};
  ASSERT_TRUE(encode_reference(CacheView{l, cache.data(), 1}, e).ok());
  for (MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
    const float x = core::read_meta(l, cache.data(), 0, 0, m);
    EXPECT_TRUE(std::isfinite(x)) << int(m);
    EXPECT_LE(std::fabs(x), 65504.0f);
  }
}

}  // namespace
}  // namespace turboquant
