// Garbage cache bytes and canaries.
//  - Random or adversarial cache bytes (NaN/inf fp16 metadata, FP8 NaN codes,
//    huge norms) with valid tables: every decode returns ok, reads only inside
//    the cache and the tables (exact-size heap buffers: AddressSanitizer
//    reports any overrun) and writes only out and lse. Rows are unspecified
//    where NaN appears (ARITHMETIC.md §6); elsewhere the backends agree to the bit.
//  - Canaries: guard bytes before and after every buffer the library writes
//    (out, lse, the cache) stay intact; decode never writes its inputs; encode
//    writes exactly the bytes of its slots (by a mask from the spec, not from
//    core::BlockLayout: in AoS every other slot of a block, the bytes between
//    slots and any padding keep their values); a rejected call writes nothing.
// Every test runs both layouts (k8v4 AoS also with e4b15 keys).
#include <gtest/gtest.h>

#include <random>

#include "fuzz/fuzz_encode.hpp"
#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

void fill_garbage(std::vector<std::uint8_t>& cache, int pattern, std::mt19937& rng) {
  for (std::size_t i = 0; i < cache.size(); ++i) {
    switch (pattern) {
      case 0: cache[i] = static_cast<std::uint8_t>(rng()); break;  // random
      case 1: cache[i] = 0xff; break;                               // fp16 NaN, FP8 -NaN, all codes max
      case 2: cache[i] = i % 2 ? 0x7c : 0x00; break;               // fp16 +inf everywhere
      case 3: cache[i] = i % 2 ? 0x7b : 0xff; break;               // fp16 65504
      default: cache[i] = i % 2 ? 0xfc : 0x00; break;              // fp16 -inf
    }
  }
}

// The (layout, FP8 flavour) pairs every test here runs: SoA e4m3, AoS e4m3,
// AoS e4b15 (the flavour matters to FP8 keys only; MSE presets skip it).
struct LayoutCase {
  LayoutKind layout;
  Fp8Format fp8;
  bool applies_to(Preset p) const { return fp8 == Fp8Format::kE4m3 || p == Preset::kK8V4; }
  std::string name() const { return std::string(" ") + layout_name(layout) + (fp8 == Fp8Format::kE4b15 ? " e4b15" : ""); }
};
const LayoutCase kLayouts[] = {
    {LayoutKind::kSoA, Fp8Format::kE4m3}, {LayoutKind::kAoS, Fp8Format::kE4m3}, {LayoutKind::kAoS, Fp8Format::kE4b15}};

TEST(Garbage, DecodeOfArbitraryCacheBytesReturnsAndStaysInside) {
  const std::uint32_t s = seed(61);
  std::mt19937 rng(s);
  for (const LayoutCase& lc : kLayouts) {
    for (Preset preset : kAllPresets) {
      if (!lc.applies_to(preset)) continue;
      for (int pattern = 0; pattern < 5; ++pattern) {
        tqt::ProblemSpec spec;
        spec.format = core::preset_format(preset, pattern % 2 ? 64 : 128, lc.layout, lc.fp8);
        spec.block_size = pattern == 3 ? 1 : 16;
        spec.num_kv_heads = 2;
        spec.group = 3;
        spec.seq_lens = {45, 1, 0, 16};
        spec.seed = s + pattern;
        tqt::Problem p = tqt::make_problem(spec);
        fill_garbage(p.cache, pattern, rng);
        p.cache.shrink_to_fit();
        std::vector<float> ref_out;
        for (const DecodeBackend& be : decode_backends()) {
          std::vector<float> out, lse;
          DecodeArgs a = p.args(out, lse, 3);
          Guarded g_out(out.size() * 4), g_lse(lse.size() * 4);
          a.out = g_out.buffer();
          a.lse = g_lse.buffer();
          const std::vector<std::uint8_t> before = p.cache;
          const Status st = be.decode(p.view(), a);
          const std::string what =
              std::string(preset_name(preset)) + lc.name() + " pattern " + std::to_string(pattern) + " " + be.name;
          ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
          EXPECT_EQ(g_out.damage(), "") << what;
          EXPECT_EQ(g_lse.damage(), "") << what;
          EXPECT_TRUE(before == p.cache) << what << ": decode wrote the cache";
          std::memcpy(out.data(), g_out.data(), g_out.size());
          if (be.name == "reference") {
            ref_out = out;
            continue;
          }
          const int dims = spec.format.head_dim;
          for (std::size_t row = 0; row < out.size() / dims; ++row) {
            bool nan = false;
            for (int d = 0; d < dims; ++d) nan |= std::isnan(out[row * dims + d]) || std::isnan(ref_out[row * dims + d]);
            if (!nan) {
              EXPECT_EQ(std::memcmp(&out[row * dims], &ref_out[row * dims], dims * 4), 0) << what << " row " << row;
            }
          }
        }
      }
    }
  }
}

TEST(Canary, DecodeWritesOnlyOutAndLse) {
  const std::uint32_t s = seed(62);
  for (const LayoutCase& lc : kLayouts) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (bool with_lse : {true, false}) {
        tqt::ProblemSpec spec;
        spec.format = core::preset_format(Preset::kK8V4, 64, lc.layout, lc.fp8);
        spec.seq_lens = {33, 0, 7};
        spec.seed = s;
        const tqt::Problem p = tqt::make_problem(spec);
        for (const DecodeBackend& be : decode_backends()) {
          std::vector<float> out, lse;
          DecodeArgs a = p.args(out, lse);
          Guarded g_out(out.size() * dtype_size(t)), g_lse(lse.size() * 4);
          a.out = g_out.buffer();
          a.out_dtype = t;
          a.lse = with_lse ? g_lse.buffer() : MutableBuffer{};
          // Inputs in guarded copies too: decode must not write them.
          Guarded g_cache(p.cache.size()), g_query(p.query.size() * 4), g_table(p.block_table.size() * 4),
              g_lens(p.seq_lens.size() * 4);
          std::memcpy(g_cache.data(), p.cache.data(), p.cache.size());
          std::memcpy(g_query.data(), p.query.data(), g_query.size());
          std::memcpy(g_table.data(), p.block_table.data(), g_table.size());
          std::memcpy(g_lens.data(), p.seq_lens.data(), g_lens.size());
          a.query = g_query.const_buffer();
          a.block_table = g_table.const_buffer();
          a.seq_lens = g_lens.const_buffer();
          const std::string what = std::string(dtype_name(t)) + lc.name() + (with_lse ? " lse " : " no lse ") + be.name;
          ASSERT_TRUE(be.decode(ConstCacheView(p.layout, g_cache.data(), p.num_blocks), a).ok()) << what;
          for (const Guarded* g : {&g_out, &g_lse, &g_cache, &g_query, &g_table, &g_lens}) EXPECT_EQ(g->damage(), "") << what;
          EXPECT_EQ(std::memcmp(g_cache.data(), p.cache.data(), p.cache.size()), 0) << what;
          EXPECT_EQ(std::memcmp(g_query.data(), p.query.data(), g_query.size()), 0) << what;
          EXPECT_EQ(std::memcmp(g_table.data(), p.block_table.data(), g_table.size()), 0) << what;
          if (!with_lse) {
            for (std::size_t i = 0; i < g_lse.size(); ++i) ASSERT_EQ(g_lse.data()[i], 0xA5) << what << ": lse not requested";
          }
          // Every output element was written (no all-0xA5 filler element left).
          for (std::size_t i = 0; i < g_out.size(); i += dtype_size(t)) {
            bool filler = true;
            for (std::size_t j = 0; j < dtype_size(t); ++j) filler &= g_out.data()[i + j] == 0xA5;
            ASSERT_FALSE(filler) << what << " element " << i / dtype_size(t) << " was not written";
          }
        }
      }
    }
  }
}

TEST(Canary, EncodeWritesExactlyTheBytesOfItsSlots) {
  const std::uint32_t s = seed(63);
  std::mt19937 rng(s);
  for (const LayoutCase& lc : kLayouts) {
    for (Preset preset : kAllPresets) {
      if (!lc.applies_to(preset)) continue;
      for (int bs : {1, 3, 16}) {
        tqt::ProblemSpec spec;
        spec.format = core::preset_format(preset, 64, lc.layout, lc.fp8);
        spec.block_size = bs;
        spec.num_kv_heads = 3;
        spec.seq_lens = {2 * bs + 1, bs};
        spec.seed = s + bs;
        const tqt::Problem p = tqt::make_problem(spec);
        std::vector<std::int64_t> slots = p.slots;
        for (std::size_t i = 0; i < slots.size(); i += 3) slots[i] = -1;  // padding rows: skipped
        for (const EncodeBackend& be : encode_backends()) {
          Guarded g_cache(p.cache.size());
          for (std::size_t i = 0; i < g_cache.size(); ++i) g_cache.data()[i] = static_cast<std::uint8_t>(rng());
          const std::vector<std::uint8_t> before(g_cache.data(), g_cache.data() + g_cache.size());
          Guarded g_keys(p.keys.size() * 4), g_values(p.values.size() * 4), g_slots(slots.size() * 8);
          std::memcpy(g_keys.data(), p.keys.data(), g_keys.size());
          std::memcpy(g_values.data(), p.values.data(), g_values.size());
          std::memcpy(g_slots.data(), slots.data(), g_slots.size());
          EncodeArgs e;
          e.keys = g_keys.const_buffer();
          e.values = g_values.const_buffer();
          e.num_tokens = static_cast<std::int64_t>(slots.size());
          e.slot_mapping = g_slots.const_buffer();
          const std::string what = std::string(preset_name(preset)) + lc.name() + " bs " + std::to_string(bs) + " " + be.name;
          ASSERT_TRUE(be.encode(CacheView{p.layout, g_cache.data(), p.num_blocks}, e).ok()) << what;
          for (const Guarded* g : {&g_cache, &g_keys, &g_values, &g_slots}) EXPECT_EQ(g->damage(), "") << what;
          EXPECT_EQ(std::memcmp(g_keys.data(), p.keys.data(), g_keys.size()), 0) << what;
          EXPECT_EQ(std::memcmp(g_slots.data(), slots.data(), g_slots.size()), 0) << what;
          // The spec's bytes of the stored slots; the fuzzers' mask (from
          // BlockLayout) must name the same bytes.
          const std::vector<std::uint8_t> mask = tqt::oracle_slot_mask(p.layout, p.num_blocks, slots);
          ASSERT_TRUE(mask == tq_fuzz::slot_byte_mask(p.layout, p.num_blocks, slots)) << what;
          std::int64_t outside = 0, inside_written = 0, first = -1;
          for (std::size_t i = 0; i < before.size(); ++i) {
            const bool changed = g_cache.data()[i] != before[i];
            if (changed && !mask[i]) {
              ++outside;
              if (first < 0) first = static_cast<std::int64_t>(i);
            }
            inside_written += changed && mask[i];
          }
          EXPECT_EQ(outside, 0) << what << ": first stray byte " << first;
          EXPECT_GT(inside_written, 0) << what;
          // The written bytes are those of a clean encode (random prior bytes do not leak in).
          std::vector<std::uint8_t> clean(p.cache.size(), 0);
          ASSERT_TRUE(encode_reference(CacheView{p.layout, clean.data(), p.num_blocks}, e).ok());
          for (std::size_t i = 0; i < before.size(); ++i) {
            if (mask[i]) {
              ASSERT_EQ(g_cache.data()[i], clean[i]) << what << " byte " << i;
            }
          }
        }
      }
    }
  }
}

TEST(Canary, RejectedCallsWriteNothing) {
  const std::uint32_t s = seed(64);
  for (const LayoutCase& lc : kLayouts) {
    tqt::ProblemSpec spec;
    spec.format = core::preset_format(lc.fp8 == Fp8Format::kE4b15 ? Preset::kK8V4 : Preset::k4BitNc, 128, lc.layout, lc.fp8);
    spec.seq_lens = {20, 9};
    spec.seed = s;
    const tqt::Problem p = tqt::make_problem(spec);
    std::vector<std::int32_t> bad_table = p.block_table;
    bad_table[p.max_blocks] = static_cast<std::int32_t>(p.num_blocks);  // sequence 1's first block: out of range
    for (const DecodeBackend& be : decode_backends()) {
      std::vector<float> out, lse;
      DecodeArgs a = p.args(out, lse);
      Guarded g_out(out.size() * 4), g_lse(lse.size() * 4);
      a.out = g_out.buffer();
      a.lse = g_lse.buffer();
      a.block_table = tqt::bytes_of(bad_table);
      EXPECT_EQ(be.decode(p.view(), a).code(), StatusCode::kOutOfRange) << be.name;
      for (std::size_t i = 0; i < g_out.size(); ++i) ASSERT_EQ(g_out.data()[i], 0xA5) << be.name;
      for (std::size_t i = 0; i < g_lse.size(); ++i) ASSERT_EQ(g_lse.data()[i], 0xA5) << be.name;
    }
    std::vector<std::int64_t> slots = p.slots;
    slots.back() = slots.front();  // a duplicate: the whole call is rejected
    for (const EncodeBackend& be : encode_backends()) {
      std::vector<std::uint8_t> cache = p.cache;
      const EncodeArgs e = tqt::host_encode_args(tqt::bytes_of(p.keys), tqt::bytes_of(p.values), DType::kFloat32, slots);
      EXPECT_EQ(be.encode(CacheView{p.layout, cache.data(), p.num_blocks}, e).code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(cache == p.cache) << be.name << lc.name();
    }
  }
}

}  // namespace
}  // namespace tq_rel
