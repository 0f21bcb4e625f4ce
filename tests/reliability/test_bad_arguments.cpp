// Every shape / dtype / range error of the decode and encode API, on every
// backend: the Status code, a message naming the argument and the value, and
// nothing written (out, lse and cache keep their canaries). One row per case
// of docs/RELIABILITY.md §1. Every table runs on a cache of each layout.
#include <gtest/gtest.h>

#include <limits>

#include "common/shape_grid.hpp"
#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

struct DecodeCall {
  ConstCacheView cache;
  DecodeArgs args;
};

// One bad call of a table: what it changes in a valid call, and the status
// code and message fragment every backend must answer with.
template <class... Call>
struct BadRow {
  const char* name;
  std::function<void(Call&...)> mutate;
  StatusCode code;
  std::string fragment;
};
using DecodeRow = BadRow<DecodeCall>;

class BadDecode : public ::testing::Test {
 protected:
  tqt::Problem p =
      tqt::make_problem(tqt::Shape{.preset = Preset::k4BitNc, .head_dim = 64, .group = 2, .seed = 81}.spec({20, 33}));
  // The same problem in the AoS layout (same K/V, tables and lengths).
  const tqt::Problem aos_ = tqt::make_problem(
      tqt::Shape{.preset = Preset::k4BitNc, .head_dim = 64, .group = 2, .seed = 81, .layout = LayoutKind::kAoS}.spec(
          {20, 33}));
  std::vector<float> out, lse;
  std::vector<std::int32_t> table = p.block_table, lens = p.seq_lens;
  std::vector<float> query = p.query;
  std::vector<float> rotation = std::vector<float>(64 * 64, 0.0f);
  Codebook cb = vllm_codebook(64, 4);

  void check(const std::vector<DecodeRow>& rows) {
    const tqt::Problem soa = p;
    for (const tqt::Problem* layout_problem : {&soa, &aos_}) {
      p = *layout_problem;
      for (const DecodeBackend& be : decode_backends()) {
        for (const DecodeRow& row : rows) {
          table = p.block_table;
          lens = p.seq_lens;
          query = p.query;
          DecodeCall c{p.view(), p.args(out, lse)};
          c.args.block_table = {table.data(), table.size() * 4};
          c.args.seq_lens = {lens.data(), lens.size() * 4};
          c.args.query = {query.data(), query.size() * 4};
          row.mutate(c);
          const Status s = be.decode(c.cache, c.args);
          SCOPED_TRACE(layout_name(p.layout.format.layout));
          EXPECT_EQ(s.code(), row.code) << be.name << " / " << row.name << ": " << s.to_string();
          EXPECT_NE(s.message().find(row.fragment), std::string::npos)
              << be.name << " / " << row.name << ": message \"" << s.message() << "\" lacks \"" << row.fragment << "\"";
          EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
          for (float v : out) ASSERT_EQ(v, -7.0f) << be.name << " / " << row.name << ": out written";
          for (float v : lse) ASSERT_EQ(v, -7.0f) << be.name << " / " << row.name << ": lse written";
        }
      }
    }
    p = soa;
  }
};

TEST_F(BadDecode, LayoutAndCacheErrors) {
  using C = DecodeCall;
  check({
      {"block_size 0", [](C& c) { c.cache.layout.block_size = 0; }, StatusCode::kInvalidArgument, "block_size must be >= 1"},
      {"block_size 4097", [](C& c) { c.cache.layout.block_size = 4097; }, StatusCode::kInvalidArgument, "block_size must be <= 4096"},
      {"kv heads 0", [](C& c) { c.cache.layout.num_kv_heads = 0; }, StatusCode::kInvalidArgument, "num_kv_heads must be >= 1"},
      {"kv heads 4097", [](C& c) { c.cache.layout.num_kv_heads = 4097; }, StatusCode::kInvalidArgument, "num_kv_heads must be <= 4096"},
      {"head_dim 96 Lloyd-Max", [](C& c) { c.cache.layout.format.head_dim = 96; }, StatusCode::kInvalidArgument, "power-of-two head_dim"},
      {"head_dim 16", [](C& c) { c.cache.layout.format.head_dim = 16; }, StatusCode::kInvalidArgument, "head_dim must be in [32, 512]"},
      {"head_dim 1024", [](C& c) { c.cache.layout.format.head_dim = 1024; }, StatusCode::kInvalidArgument, "head_dim must be in [32, 512]"},
      {"key_bits 5", [](C& c) { c.cache.layout.format.key_bits = 5; }, StatusCode::kInvalidArgument, "key_bits must be 3, 4 or 8"},
      {"value_bits 2", [](C& c) { c.cache.layout.format.value_bits = 2; }, StatusCode::kInvalidArgument, "value_bits must be 3 or 4"},
      {"fp8 + norm correction", [](C& c) { c.cache.layout.format.key_bits = 8; }, StatusCode::kInvalidArgument, "norm correction applies to Lloyd-Max keys only"},
      {"layout 2", [](C& c) { c.cache.layout.format.layout = static_cast<LayoutKind>(2); }, StatusCode::kInvalidArgument, "layout = 2, fp8_format = e4m3}: layout must be soa or aos"},
      {"layout 255", [](C& c) { c.cache.layout.format.layout = static_cast<LayoutKind>(255); }, StatusCode::kInvalidArgument, "layout must be soa or aos"},
      {"fp8_format 2", [](C& c) { c.cache.layout.format = core::preset_format(Preset::kK8V4, 64, c.cache.layout.format.layout);
         c.cache.layout.format.fp8_format = static_cast<Fp8Format>(2); }, StatusCode::kInvalidArgument, "fp8_format = 2}: fp8_format must be e4m3 or e4b15"},
      {"e4b15 on Lloyd-Max keys", [](C& c) { c.cache.layout.format.fp8_format = Fp8Format::kE4b15; }, StatusCode::kInvalidArgument,
       "fp8_format e4b15 applies to FP8 keys only"},
      {"num_blocks 0", [](C& c) { c.cache.num_blocks = 0; }, StatusCode::kInvalidArgument, "cache.num_blocks = 0"},
      {"num_blocks -5", [](C& c) { c.cache.num_blocks = -5; }, StatusCode::kInvalidArgument, "cache.num_blocks = -5"},
      {"cache null", [](C& c) { c.cache.data = nullptr; }, StatusCode::kBufferTooSmall, "cache.data is null"},
  });
}

TEST_F(BadDecode, ShapeAndScalarErrors) {
  using C = DecodeCall;
  check({
      {"batch -1", [](C& c) { c.args.batch = -1; }, StatusCode::kInvalidArgument, "batch = -1"},
      {"q heads 0", [](C& c) { c.args.num_q_heads = 0; }, StatusCode::kInvalidArgument, "num_q_heads = 0"},
      {"q heads 3 (Hk 2)", [](C& c) { c.args.num_q_heads = 3; }, StatusCode::kInvalidArgument, "num_q_heads = 3 is not a multiple of num_kv_heads = 2"},
      {"max blocks -1", [](C& c) { c.args.max_blocks_per_seq = -1; }, StatusCode::kInvalidArgument, "max_blocks_per_seq = -1"},
      {"scale nan", [](C& c) { c.args.softmax_scale = std::numeric_limits<float>::quiet_NaN(); }, StatusCode::kNonFinite, "softmax_scale = nan"},
      {"scale -inf", [](C& c) { c.args.softmax_scale = -std::numeric_limits<float>::infinity(); }, StatusCode::kNonFinite, "softmax_scale = -inf"},
      {"splits 0", [](C& c) { c.args.num_splits = 0; }, StatusCode::kInvalidArgument, "num_splits = 0: must be in [1, 1024]"},
      {"splits 1025", [](C& c) { c.args.num_splits = 1025; }, StatusCode::kInvalidArgument, "num_splits = 1025"},
  });
}

TEST_F(BadDecode, BufferErrors) {
  using C = DecodeCall;
  check({
      {"query null", [](C& c) { c.args.query.data = nullptr; }, StatusCode::kBufferTooSmall, "query is null but must hold [2, 4, 64] float32"},
      {"query short", [](C& c) { c.args.query.bytes -= 1; }, StatusCode::kBufferTooSmall, "query has 2047 bytes but [2, 4, 64] float32 needs 2048"},
      {"query fp16 as fp32", [](C& c) { c.args.query.bytes /= 2; c.args.query_dtype = DType::kFloat32; }, StatusCode::kBufferTooSmall, "query has 1024 bytes"},
      {"out null", [](C& c) { c.args.out.data = nullptr; }, StatusCode::kBufferTooSmall, "out is null"},
      {"out short", [](C& c) { c.args.out.bytes = 100; }, StatusCode::kBufferTooSmall, "out has 100 bytes but [2, 4, 64] float32 needs 2048"},
      {"out bf16 short", [](C& c) { c.args.out_dtype = DType::kBFloat16; c.args.out.bytes = 1023; }, StatusCode::kBufferTooSmall, "[2, 4, 64] bfloat16 needs 1024"},
      {"lse short", [](C& c) { c.args.lse.bytes = 31; }, StatusCode::kBufferTooSmall, "lse has 31 bytes but [2, 4] float32 needs 32"},
      {"lse null with bytes", [](C& c) { c.args.lse.data = nullptr; }, StatusCode::kBufferTooSmall, "lse is null"},
      {"seq_lens short", [](C& c) { c.args.seq_lens.bytes = 7; }, StatusCode::kBufferTooSmall, "seq_lens has 7 bytes but [2] int32 needs 8"},
      {"seq_lens null", [](C& c) { c.args.seq_lens.data = nullptr; }, StatusCode::kBufferTooSmall, "seq_lens is null"},
      {"table short", [](C& c) { c.args.block_table.bytes -= 4; }, StatusCode::kBufferTooSmall, "block_table has"},
      {"table null", [](C& c) { c.args.block_table.data = nullptr; }, StatusCode::kBufferTooSmall, "block_table is null"},
  });
}

TEST_F(BadDecode, TableAndLengthErrors) {
  using C = DecodeCall;
  const int mb = p.max_blocks;
  const std::string nb = std::to_string(p.num_blocks);
  check({
      {"seq_len -1", [this](C&) { lens[1] = -1; }, StatusCode::kInvalidArgument, "seq_lens[1] = -1: must be >= 0"},
      {"seq_len too long", [this, mb](C&) { lens[1] = 16 * mb + 1; }, StatusCode::kOutOfRange,
       "seq_lens[1] = " + std::to_string(16 * mb + 1) + " needs " + std::to_string(mb + 1) + " blocks"},
      {"block id = num_blocks", [this, mb](C&) { table[mb + 2] = static_cast<std::int32_t>(p.num_blocks); }, StatusCode::kOutOfRange,
       "block_table[1][2] = " + nb + " is outside [0, " + nb + ") (num_blocks)"},
      {"block id -1", [this](C&) { table[1] = -1; }, StatusCode::kOutOfRange, "block_table[0][1] = -1 is outside"},
      {"block id INT32_MIN", [this, mb](C&) { table[mb] = std::numeric_limits<std::int32_t>::min(); }, StatusCode::kOutOfRange,
       "block_table[1][0] = -2147483648"},
  });
}

TEST_F(BadDecode, CodebookAndRotationErrors) {
  using C = DecodeCall;
  check({
      {"codebook 3 bits for 4-bit keys", [this](C& c) { cb = vllm_codebook(64, 3); c.args.codebook = &cb; }, StatusCode::kInvalidArgument,
       "codebook has 3 bits but the format's keys have 4"},
      {"codebook nan", [this](C& c) { cb = vllm_codebook(64, 4); cb.centroids[5] = NAN; c.args.codebook = &cb; }, StatusCode::kNonFinite,
       "codebook.centroids[5] is not finite"},
      {"rotation short", [this](C& c) { c.args.rotation = {rotation.data(), 64 * 64 * 4 - 4}; }, StatusCode::kBufferTooSmall,
       "rotation has 16380 bytes but [64, 64] float32 needs 16384"},
      {"rotation inf", [this](C& c) { rotation.assign(64 * 64, 0.0f); rotation[64 * 3 + 9] = INFINITY; c.args.rotation = {rotation.data(), rotation.size() * 4}; },
       StatusCode::kNonFinite, "rotation[3][9] is not finite"},
      {"rotation with FP8 keys", [this](C& c) { c.cache.layout.format = core::preset_format(Preset::kK8V4, 64); rotation.assign(64 * 64, 0.0f);
         c.args.rotation = {rotation.data(), rotation.size() * 4}; }, StatusCode::kInvalidArgument, "FP8 keys are not rotated"},
  });
}

TEST_F(BadDecode, EmptyBatchAndEmptySequencesAreFine) {
  for (const DecodeBackend& be : decode_backends()) {
    DecodeArgs a = p.args(out, lse);
    a.batch = 0;
    a.query = {};
    a.out = {};
    a.lse = {};
    a.seq_lens = {};
    a.block_table = {};
    EXPECT_TRUE(be.decode(p.view(), a).ok()) << be.name << ": batch 0 needs no buffers";
    std::vector<std::int32_t> zero = {0, 0};
    a = p.args(out, lse);
    a.seq_lens = {zero.data(), 8};
    a.max_blocks_per_seq = 0;
    a.block_table = {};
    ASSERT_TRUE(be.decode(p.view(), a).ok()) << be.name;
    for (float v : out) EXPECT_EQ(v, 0.0f) << be.name << ": empty sequence gives 0";
    for (float v : lse) EXPECT_EQ(v, -std::numeric_limits<float>::infinity()) << be.name << ": and LSE -inf";
  }
}

#if TQ_REL_HAVE_CPU
TEST_F(BadDecode, CpuOptionErrors) {
  CpuOptions o;
  o.threads = -1;
  DecodeArgs a = p.args(out, lse);
  Status s = decode_cpu(p.view(), a, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.threads = -1"), std::string::npos) << s.message();
  o.threads = 0;
  o.isa = "sse9";
  s = decode_cpu(p.view(), a, o);
  EXPECT_EQ(s.code(), StatusCode::kBackendUnavailable);
  EXPECT_NE(s.message().find("\"sse9\" is not a known ISA"), std::string::npos) << s.message();
  for (float v : out) ASSERT_EQ(v, -7.0f);
  o.isa.clear();
  o.threads = 1 << 20;  // far more than the machine: capped by oneTBB, still correct
  std::vector<float> want_out, want_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse)).ok());
  a = p.args(out, lse);
  ASSERT_TRUE(decode_cpu(p.view(), a, o).ok());
  EXPECT_TRUE(bits_equal(out, want_out));
}
#endif

// ---- encode -----------------------------------------------------------------

using EncodeRow = BadRow<EncodeArgs, CacheView>;

class BadEncode : public ::testing::Test {
 protected:
  tqt::Problem p = tqt::make_problem(tqt::Shape{.preset = Preset::k3BitNc, .head_dim = 64, .seed = 82}.spec({12}));
  std::vector<std::int64_t> slots = p.slots;
  std::vector<float> rotation = std::vector<float>(64 * 64, 0.0f);
  Codebook cb;

  // The same problem in the AoS layout.
  const tqt::Problem aos_ = tqt::make_problem(
      tqt::Shape{.preset = Preset::k3BitNc, .head_dim = 64, .seed = 82, .layout = LayoutKind::kAoS}.spec({12}));

  void check(const std::vector<EncodeRow>& rows) {
    const tqt::Problem soa = p;
    for (const tqt::Problem* layout_problem : {&soa, &aos_}) {
      p = *layout_problem;
      SCOPED_TRACE(layout_name(p.layout.format.layout));
      for (const EncodeBackend& be : encode_backends()) {
        for (const EncodeRow& row : rows) {
          slots = p.slots;
          std::vector<std::uint8_t> cache = p.cache;
          CacheView view{p.layout, cache.data(), p.num_blocks};
          EncodeArgs e = tqt::host_encode_args(tqt::bytes_of(p.keys), tqt::bytes_of(p.values), DType::kFloat32, slots);
          row.mutate(e, view);
          const Status s = be.encode(view, e);
          EXPECT_EQ(s.code(), row.code) << be.name << " / " << row.name << ": " << s.to_string();
          EXPECT_NE(s.message().find(row.fragment), std::string::npos)
              << be.name << " / " << row.name << ": message \"" << s.message() << "\" lacks \"" << row.fragment << "\"";
          EXPECT_TRUE(cache == p.cache) << be.name << " / " << row.name << ": cache written";
        }
      }
    }
    p = soa;
  }
};

TEST_F(BadEncode, ShapeBufferSlotAndTableErrors) {
  using E = EncodeArgs;
  using V = CacheView;
  const std::string ns = std::to_string(p.num_blocks * 16);
  check({
      {"num_tokens -1", [](E& e, V&) { e.num_tokens = -1; }, StatusCode::kInvalidArgument, "num_tokens = -1"},
      {"keys null", [](E& e, V&) { e.keys.data = nullptr; }, StatusCode::kBufferTooSmall, "keys is null but must hold [12, 2, 64] float32"},
      {"keys short", [](E& e, V&) { e.keys.bytes -= 2; }, StatusCode::kBufferTooSmall, "keys has 6142 bytes but [12, 2, 64] float32 needs 6144"},
      {"values fp32 given as bf16 count", [](E& e, V&) { e.values.bytes = 100; }, StatusCode::kBufferTooSmall, "values has 100 bytes"},
      {"slot_mapping short", [](E& e, V&) { e.slot_mapping.bytes = 95; }, StatusCode::kBufferTooSmall, "slot_mapping has 95 bytes but [12] int64 needs 96"},
      {"slot out of range", [this](E&, V&) { slots[4] = p.num_blocks * 16; }, StatusCode::kOutOfRange,
       "slot_mapping[4] = " + ns + " is outside [0, " + ns + ")"},
      {"slot INT64_MAX", [this](E&, V&) { slots[0] = std::numeric_limits<std::int64_t>::max(); }, StatusCode::kOutOfRange, "slot_mapping[0] = 9223372036854775807"},
      {"duplicate slot", [this](E&, V&) { slots[7] = slots[2]; }, StatusCode::kInvalidArgument,
       "slot_mapping names slot " + std::to_string(p.slots[2]) + " more than once"},
      {"cache null", [](E&, V& v) { v.data = nullptr; }, StatusCode::kBufferTooSmall, "cache.data is null"},
      {"bad layout", [](E&, V& v) { v.layout.block_size = -3; }, StatusCode::kInvalidArgument, "block_size must be >= 1"},
      {"layout 7", [](E&, V& v) { v.layout.format.layout = static_cast<LayoutKind>(7); }, StatusCode::kInvalidArgument, "layout must be soa or aos"},
      {"e4b15 on Lloyd-Max keys", [](E&, V& v) { v.layout.format.fp8_format = Fp8Format::kE4b15; }, StatusCode::kInvalidArgument,
       "fp8_format e4b15 applies to FP8 keys only"},
      {"codebook bits", [this](E& e, V&) { cb = vllm_codebook(64, 4); e.codebook = &cb; }, StatusCode::kInvalidArgument,
       "codebook has 4 bits but the format's keys have 3"},
      {"codebook inf", [this](E& e, V&) { cb = vllm_codebook(64, 3); cb.centroids[0] = -INFINITY; e.codebook = &cb; }, StatusCode::kNonFinite,
       "codebook.centroids[0] is not finite"},
      {"rotation short", [this](E& e, V&) { e.rotation = {rotation.data(), 100}; }, StatusCode::kBufferTooSmall, "rotation has 100 bytes"},
  });
}

TEST_F(BadEncode, NegativeSlotsAndEmptyCallsAreFine) {
  for (const EncodeBackend& be : encode_backends()) {
    std::vector<std::uint8_t> cache = p.cache;
    std::vector<std::int64_t> pad(12, -1);
    pad[3] = std::numeric_limits<std::int64_t>::min();
    EncodeArgs e;
    e.keys = {p.keys.data(), p.keys.size() * 4};
    e.values = {p.values.data(), p.values.size() * 4};
    e.num_tokens = 12;
    e.slot_mapping = {pad.data(), pad.size() * 8};
    EXPECT_TRUE(be.encode(CacheView{p.layout, cache.data(), p.num_blocks}, e).ok()) << be.name;
    EXPECT_TRUE(cache == p.cache) << be.name << ": all slots negative: nothing stored";
    e = EncodeArgs{};
    EXPECT_TRUE(be.encode(CacheView{p.layout, cache.data(), p.num_blocks}, e).ok()) << be.name << ": 0 tokens";
  }
}

TEST(BadDequantize, SlotAndBufferErrors) {
  tqt::ProblemSpec spec;
  spec.seq_lens = {5};
  spec.seed = seed(83);
  const tqt::Problem p = tqt::make_problem(spec);
  std::vector<float> k(5 * 2 * 128), v(k.size());
  std::vector<std::int64_t> slots = p.slots;
  DequantizeArgs a;
  a.slots = {slots.data(), slots.size() * 8};
  a.num_slots = 5;
  a.keys = {k.data(), k.size() * 4};
  a.values = {v.data(), v.size() * 4};
  ASSERT_TRUE(dequantize_reference(p.view(), a).ok());
  DequantizeArgs b = a;
  b.num_slots = -2;
  EXPECT_EQ(dequantize_reference(p.view(), b).code(), StatusCode::kInvalidArgument);
  b = a;
  b.values.bytes -= 1;
  EXPECT_EQ(dequantize_reference(p.view(), b).code(), StatusCode::kBufferTooSmall);
  slots[2] = p.num_blocks * 16;
  const Status s = dequantize_reference(p.view(), a);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("slots[2] = " + std::to_string(p.num_blocks * 16)), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tq_rel
