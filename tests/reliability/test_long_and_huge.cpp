// Long sequences and big caches: a 1,000,000-token sequence (tiny heads, the
// block table revisiting a few physical blocks) against float64 attention;
// 64-bit byte offsets checked at block ids and in-block positions whose
// offsets exceed 2^32, and validation of block ids near 2^31 with a cache
// view claiming more blocks than there is memory (never dereferenced). Both
// layouts (the AoS long run on one split count).
#include <gtest/gtest.h>

#include <climits>
#include <numeric>
#include <random>

#include "common/shape_grid.hpp"
#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

using core::BlockLayout;

class LongLayout : public ::testing::TestWithParam<LayoutKind> {};
TEST_P(LongLayout, OneMillionTokensMatchFloat64AndEveryBackend) {
  const std::uint32_t s = seed(31);
  std::mt19937 rng(s);
  // 4bit_nc at D = 32, 4096-token blocks, 1 KV head, 2 query heads: 38 bytes
  // per token; 6 physical blocks (0.9 MB) serve 245 table entries.
  const BlockLayout l{core::preset_format(Preset::k4BitNc, 32, GetParam()), 4096, 1};
  const std::vector<int> split_counts = l.aos() ? std::vector<int>{32} : std::vector<int>{1, 32, 1024};
  const int physical = 6;
  const int len = 1000000;
  const int max_blocks = (len + l.block_size - 1) / l.block_size;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(physical * l.block_bytes()));
  {
    std::normal_distribution<float> n(0.0f, 1.0f);
    const std::int64_t tokens = std::int64_t{physical} * l.block_size;
    std::vector<float> k(tokens * 32), v(tokens * 32);
    for (float& x : k) x = n(rng);
    for (float& x : v) x = n(rng);
    std::vector<std::int64_t> slots(tokens);
    std::iota(slots.begin(), slots.end(), 0);
    EncodeArgs e;
    e.keys = {k.data(), k.size() * 4};
    e.values = {v.data(), v.size() * 4};
    e.num_tokens = tokens;
    e.slot_mapping = {slots.data(), slots.size() * 8};
    ASSERT_TRUE(encode_reference(CacheView{l, cache.data(), physical}, e).ok());
  }
  std::vector<std::int32_t> table(max_blocks);
  for (int& b : table) b = static_cast<int>(rng() % physical);
  std::vector<std::int32_t> lens{len, 4095};
  std::vector<std::int32_t> tables(2 * max_blocks);
  std::copy(table.begin(), table.end(), tables.begin());
  std::copy(table.begin(), table.end(), tables.begin() + max_blocks);
  std::vector<float> query(2 * 2 * 32);
  std::normal_distribution<float> n(0.0f, 2.0f);
  for (float& q : query) q = n(rng);
  for (int splits : split_counts) {
    std::vector<float> ref_out, ref_lse;
    std::vector<double> out64, lse64;
    for (const DecodeBackend& be : decode_backends()) {
      std::vector<float> out(query.size(), -7.0f), lse(4, -7.0f);
      const DecodeArgs a =
          tqt::host_decode_args(tqt::bytes_of(query), 2, 2, tqt::bytes_of(tables), max_blocks, tqt::bytes_of(lens),
                                1.0f / std::sqrt(32.0f), splits, tqt::writable_bytes_of(out), tqt::writable_bytes_of(lse));
      const ConstCacheView view(l, cache.data(), physical);
      if (!implements(be, view, a)) {  // head_dim 32: not a CUDA instance
        std::printf("[ SKIPPED  ] %s does not implement head_dim %d\n", be.name.c_str(), l.format.head_dim);
        continue;
      }
      ASSERT_TRUE(be.decode(view, a).ok()) << be.name;
      EXPECT_TRUE(all_finite(out)) << be.name;
      if (be.name == "reference") {
        f64_attention_streaming(oracle_input(view, a), out64, lse64);
        const Error64 e = compare64(out, lse, out64, lse64);
        std::printf("[ MEASURED ] 1e6 tokens, %s, %d splits: out rel err %.3g, lse abs err %.3g (lse %.4f)\n",
                    layout_name(l.format.layout), splits, e.out_rel, e.lse_abs, lse64[0]);
        // One split adds a million fp32 weights to one running sum: weights
        // below half an ulp of the sum are rounded away (measured 6e-4 / 1.4e-3,
        // RELIABILITY.md); 32 splits keep each sum short (2e-6).
        EXPECT_LE(e.out_rel, splits == 1 ? 5e-3 : 1e-4) << splits << " splits";
        EXPECT_LE(e.lse_abs, splits == 1 ? 5e-3 : 1e-4) << splits << " splits";
        ref_out = out;
        ref_lse = lse;
      } else {
        EXPECT_TRUE(bits_equal(out, ref_out)) << be.name << " " << splits << " splits";
        EXPECT_TRUE(bits_equal(lse, ref_lse)) << be.name << " " << splits << " splits";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LongLayout, ::testing::Values(LayoutKind::kSoA, LayoutKind::kAoS),
                         [](const ::testing::TestParamInfo<LayoutKind>& info) { return std::string(layout_name(info.param)); });

// The exact offset, computed in 128-bit arithmetic from FORMAT.md §3.
__extension__ typedef __int128 Wide;  // a GCC/Clang extension (-Wpedantic)
// AoS (FORMAT.md, the cases README): the slot of (t, h) starts at
// (t * Hk + h) * slot bytes and holds [key codes | norm | value codes | scale
// | zero] (FP8 keys: no norm).
Wide wide_slot(const BlockLayout& l, int t, int h) {
  return (Wide(t) * l.num_kv_heads + h) * (l.aos() ? l.format.slot_bytes_aligned() : l.format.data_bytes());
}
Wide wide_value(const BlockLayout& l, int t, int h) {
  return wide_slot(l, t, h) + l.format.key_data_bytes() + (l.aos() && !l.format.fp8_keys() ? 2 : 0);
}
Wide wide_meta(const BlockLayout& l, int t, int h, MetaField f) {
  if (l.aos()) {
    if (f == MetaField::kKeyNorm) return wide_slot(l, t, h) + l.format.key_data_bytes();
    return wide_value(l, t, h) + l.format.value_data_bytes() + (f == MetaField::kValueZero ? 2 : 0);
  }
  const Wide meta = Wide(l.block_size) * l.num_kv_heads * l.format.data_bytes();
  return meta + 2 * ((Wide(h) * l.format.meta_fields() + l.format.field_index(f)) * l.block_size + t);
}

// The largest layout validate_layout accepts: 4096 x 4096 slots of 772 bytes.
constexpr BlockLayout kHuge{core::Format{8, 4, false, 512}, 4096, 4096};
static_assert(kHuge.block_bytes() == 4096LL * 4096 * 772);                       // 12.95 GB per block
static_assert(kHuge.meta_offset() == 4096LL * 4096 * 768);                       // > 2^32 inside one block
static_assert(kHuge.key_data_offset(4095, 4095) == (4096LL * 4096 - 1) * 768);  // > 2^32
static_assert(kHuge.meta_field_offset(4095, 4095, MetaField::kValueZero) == kHuge.block_bytes() - 2);
// The last block whose base fits in int64 (a cache of more blocks exceeds 2^63
// bytes; validate_cache rejects such a num_blocks, see test_findings.cpp).
static_assert(kHuge.block_base(INT64_MAX / kHuge.block_bytes()) ==
              (INT64_MAX / (4096LL * 4096 * 772)) * (4096LL * 4096 * 772));
// The same in AoS: the last slot of a block starts beyond 2^32 and its zero
// point is the block's last two bytes.
constexpr BlockLayout kHugeAos{core::Format{8, 4, false, 512, LayoutKind::kAoS}, 4096, 4096};
static_assert(kHugeAos.block_bytes() == kHuge.block_bytes());
static_assert(kHugeAos.key_data_offset(4095, 4095) == (4096LL * 4096 - 1) * 772);        // > 2^32
static_assert(kHugeAos.value_data_offset(4095, 4095) == (4096LL * 4096 - 1) * 772 + 512);
static_assert(kHugeAos.meta_field_offset(4095, 4095, MetaField::kValueScale) == kHugeAos.block_bytes() - 4);
static_assert(kHugeAos.meta_field_offset(4095, 4095, MetaField::kValueZero) == kHugeAos.block_bytes() - 2);

// Runtime values (volatile: no constant folding) at block ids and slots whose
// offsets exceed 2^32; each equals the 128-bit computation of FORMAT.md, in
// both layouts.
class OffsetsPreset : public ::testing::TestWithParam<Preset> {};
TEST_P(OffsetsPreset, SixtyFourBitArithmeticAtHugeIds) {
  volatile int bs_v = 4096, hk_v = 4096;
  const Preset preset = GetParam();
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    for (int dims : {128, 256, 512}) {
      const core::Format f = core::preset_format(preset, dims, layout);
      SCOPED_TRACE(std::string(layout_name(layout)) + " head_dim " + std::to_string(dims));
      if (core::format_problem(f)) continue;
      const BlockLayout l{f, bs_v, hk_v};
      ASSERT_TRUE(validate_layout(l).ok());
      EXPECT_EQ(Wide(l.block_bytes()), Wide(4096) * 4096 * f.slot_bytes_aligned());
      if (dims >= 256) {
        EXPECT_GT(l.block_bytes(), std::int64_t{INT32_MAX}) << "one block is beyond int32";
      }
      for (int t : {0, 1, 4095}) {
        for (int h : {0, 4095}) {
          EXPECT_EQ(Wide(l.key_data_offset(t, h)), wide_slot(l, t, h));
          EXPECT_EQ(Wide(l.value_data_offset(t, h)), wide_value(l, t, h));
          if (t == 4095 && h == 4095 && dims >= 256) {  // 2^24 slots (or records) of > 128 (> 256) bytes
            EXPECT_GT(l.key_data_offset(t, h), dims == 512 ? std::int64_t{1} << 32 : std::int64_t{INT32_MAX})
                << "the last slot starts beyond 2^31 (head_dim 256) or 2^32 (512)";
          }
          for (MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
            if (m == MetaField::kKeyNorm && f.fp8_keys()) continue;
            EXPECT_EQ(Wide(l.meta_field_offset(t, h, m)), wide_meta(l, t, h, m));
            EXPECT_LT(l.meta_field_offset(t, h, m), l.block_bytes());
          }
        }
      }
      // Block bases up to the last block id whose base still fits in int64.
      const std::int64_t last = INT64_MAX / l.block_bytes() - 1;
      for (std::int64_t b : {std::int64_t{1}, std::int64_t{3}, std::int64_t{INT32_MAX} / 4096, last}) {
        EXPECT_EQ(Wide(l.block_base(b)), Wide(b) * l.block_bytes()) << b;
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Presets, OffsetsPreset, ::testing::ValuesIn(kAllPresets), tqt::PresetName());

// The usual layout: block ids near 2^31 give offsets near 2^45.
TEST(Offsets, UsualLayoutAtBlockIdsNear2To31) {
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    const BlockLayout usual{core::preset_format(Preset::k4BitNc, 128, layout), 16, 8};
    EXPECT_EQ(Wide(usual.block_base(INT32_MAX)), Wide(INT32_MAX) * 17152);
    EXPECT_EQ(usual.block_base(INT32_MAX) + usual.meta_field_offset(15, 7, MetaField::kValueZero),
              std::int64_t{INT32_MAX} * 17152 + 17150);
  }
  // AoS: the key norm of the last slot sits 4 bytes before its scale.
  const BlockLayout aos{core::preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS), 16, 8};
  EXPECT_EQ(aos.block_base(INT32_MAX) + aos.meta_field_offset(15, 7, MetaField::kKeyNorm),
            std::int64_t{INT32_MAX} * 17152 + 17152 - 134 + 64);
}

// A cache view that claims more blocks than the memory behind it: only the
// validation may look at it (it never reads the cache bytes).
struct FakeCache {
  explicit FakeCache(LayoutKind kind) : layout{core::preset_format(Preset::k4BitNc, 64, kind), 16, 2} {}
  BlockLayout layout;
  std::vector<std::uint8_t> memory = std::vector<std::uint8_t>(64);
  ConstCacheView view(std::int64_t num_blocks) const { return ConstCacheView(layout, memory.data(), num_blocks); }
};

TEST(Offsets, BlockIdsNear2To31ValidateWithoutTouchingTheCache) {
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    const FakeCache fake(layout);
    const int dims = 64;
    std::vector<float> query(4 * dims, 0.5f), out(4 * dims);
    std::vector<std::int32_t> lens{33};
    for (std::int64_t num_blocks : {std::int64_t{INT32_MAX}, std::int64_t{INT32_MAX} + 1, std::int64_t{1} << 40}) {
      for (std::int32_t id : {0, INT32_MAX - 1, INT32_MAX, -1, INT32_MIN}) {
        std::vector<std::int32_t> table{0, id, 5};
        DecodeArgs a;
        a.query = {query.data(), query.size() * 4};
        a.batch = 1;
        a.num_q_heads = 4;
        a.block_table = {table.data(), table.size() * 4};
        a.max_blocks_per_seq = 3;
        a.seq_lens = {lens.data(), 4};
        a.softmax_scale = 0.125f;
        a.out = {out.data(), out.size() * 4};
        const Status s = validate_decode(fake.view(num_blocks), a);
        const bool inside = id >= 0 && id < num_blocks;
        EXPECT_EQ(s.ok(), inside) << "id " << id << " num_blocks " << num_blocks << ": " << s.to_string();
        if (!inside) {
          EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
          EXPECT_NE(s.message().find("block_table[0][1] = " + std::to_string(id) + " is outside [0, " +
                                     std::to_string(num_blocks) + ")"),
                    std::string::npos)
              << s.message();
        }
      }
    }
  }
}

TEST(Offsets, SlotsNearTheEndOfAHugeCacheValidate) {
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    const FakeCache fake(layout);
    const std::int64_t num_blocks = std::int64_t{1} << 40;  // 2^44 slots, 2^40 * 2240 bytes
    const std::int64_t num_slots = num_blocks * fake.layout.block_size;
    std::vector<float> kv(2 * 2 * 64, 0.25f);
    for (std::int64_t slot : {num_slots - 1, std::int64_t{INT32_MAX} + 7, num_slots, num_slots + 1, INT64_MAX}) {
      std::vector<std::int64_t> slots{slot, -1};
      EncodeArgs e;
      e.keys = e.values = {kv.data(), kv.size() * 4};
      e.num_tokens = 2;
      e.slot_mapping = {slots.data(), 16};
      const Status s = validate_encode(fake.view(num_blocks), e);
      EXPECT_EQ(s.ok(), slot < num_slots) << slot << ": " << s.to_string();
      if (slot >= num_slots) {
        EXPECT_NE(s.message().find("slot_mapping[0] = " + std::to_string(slot) + " is outside [0, " +
                                   std::to_string(num_slots) + ")"),
                  std::string::npos)
            << s.message();
      }
    }
  }
}

}  // namespace
}  // namespace tq_rel
