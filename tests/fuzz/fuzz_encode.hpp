// Fuzz target: encode (the store) over arbitrary slot mappings, K/V values
// and arguments. Invariants:
//   - validate_encode, encode_reference (and encode_cpu where it exists)
//     return the same status code; on error no cache byte changes;
//   - on success only the bytes of the stored slots change (key bytes, value
//     bytes, metadata fields of every KV head of each slot whose mapping is
//     >= 0): every other byte, padding included, keeps its random value; the
//     mask of those bytes from core::BlockLayout equals the one from the
//     oracle's spec-written slot map (both layouts: in AoS the other slots of
//     a block and the bytes between slots must keep their values);
//   - no metadata field written from finite input is inf or NaN (fp16 clamp);
//   - encode_cpu writes the same bytes as encode_reference;
//   - a "fake" cache (num_blocks up to 2^63 - 1 with little memory behind it)
//     is only validated: slot ranges must be computed without overflow.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_decode.hpp"
#include "turboquant/core/token_codec.hpp"

namespace tq_fuzz {

// 1 for every byte of `cache` that an encode of `slots` may write.
inline std::vector<std::uint8_t> slot_byte_mask(const turboquant::BlockLayout& l, std::int64_t num_blocks,
                                                const std::vector<std::int64_t>& slots) {
  using turboquant::MetaField;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(num_blocks * l.block_bytes()), 0);
  const auto mark = [&](std::int64_t at, std::int64_t n) { std::fill_n(mask.begin() + at, n, std::uint8_t{1}); };
  for (std::int64_t slot : slots) {
    if (slot < 0 || slot >= num_blocks * l.block_size) continue;
    const std::int64_t base = l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      mark(base + l.key_data_offset(t, h), l.format.key_data_bytes());
      mark(base + l.value_data_offset(t, h), l.format.value_data_bytes());
      if (!l.format.fp8_keys()) mark(base + l.meta_field_offset(t, h, MetaField::kKeyNorm), 2);
      mark(base + l.meta_field_offset(t, h, MetaField::kValueScale), 2);
      mark(base + l.meta_field_offset(t, h, MetaField::kValueZero), 2);
    }
  }
  return mask;
}

inline int fuzz_encode(const std::uint8_t* data, std::size_t size) {
  using namespace turboquant;
  Input in(data, size);
  const std::uint8_t mode = in.u8();
  const bool wild = mode & 0x01;
  const bool fake = mode & 0x02;
  const bool custom_cb = mode & 0x04;
  const bool dense_rot = mode & 0x08;
  const bool shorten = mode & 0x10;
  const bool no_check = mode & 0x20;
  const bool raw_values = mode & 0x40;

  BlockLayout l;
  l.format = fuzz_format(in);
  l.block_size = wild ? in.wild_i32() : static_cast<int>(in.range(1, 40));
  l.num_kv_heads = wild ? in.wild_i32() : static_cast<int>(in.range(1, 3));
  const bool layout_ok = validate_layout(l).ok();

  EncodeArgs e;
  e.dtype = static_cast<DType>(in.u8() % 3);
  e.num_tokens = wild ? in.wild_i64() : in.range(0, 40);
  e.check_finite = !no_check;
  const int shorten_which = static_cast<int>(in.range(0, 2));
  const std::int64_t num_blocks = fake ? in.wild_i64() : in.range(1, 8);
  const std::int64_t cache_bytes = layout_ok ? checked_product({num_blocks, l.block_bytes()}) : -1;
  const bool real_cache = !fake && cache_bytes >= 0 && static_cast<std::size_t>(cache_bytes) <= kMaxCache;
  Exact cache(real_cache ? static_cast<std::size_t>(cache_bytes) : 64);
  fill_bytes(cache.v.data(), cache.size(), in.u32());

  const int dims = l.format.head_dim;
  const std::int64_t kv = checked_product({e.num_tokens, l.num_kv_heads, dims, std::int64_t(dtype_size(e.dtype))});
  Exact keys(sized(kv, in, shorten && shorten_which == 0));
  Exact values(sized(kv, in, shorten && shorten_which == 1));
  Exact slots(sized(checked_product({e.num_tokens, 8}), in, shorten && shorten_which == 2));
  static const float kMagnitudes[] = {1.0f, 1.0f, 1e-6f, 1e3f, 1e5f, 1e6f, 125000.0f, 1e30f};
  fill_floats(keys, e.dtype, in, in.pick(kMagnitudes), raw_values);
  fill_floats(values, e.dtype, in, in.pick(kMagnitudes), raw_values && in.flag());
  const std::int64_t num_slots = layout_ok && num_blocks > 0 && !fake ? num_blocks * l.block_size : 1;
  std::vector<std::int64_t> slot_values;
  for (std::size_t i = 0; i + 8 <= slots.size(); i += 8) {
    std::int64_t s;
    switch (in.u8() % 8) {
      case 0: s = in.wild_i64(); break;
      case 1: s = -1; break;
      case 2: s = slot_values.empty() ? 0 : slot_values[in.u8() % slot_values.size()]; break;  // a duplicate
      case 3: s = num_slots; break;                                                            // one past the end
      default: s = in.range(0, num_slots - 1);
    }
    slot_values.push_back(s);
    std::memcpy(slots.v.data() + i, &s, 8);
  }
  e.keys = {keys.data(), keys.size()};
  e.values = {values.data(), values.size()};
  e.slot_mapping = {slots.data(), slots.size()};
  Codebook cb;
  Exact rotation;
  fuzz_codebook_and_rotation(in, e, l.format.key_bits, dims, custom_cb, dense_rot, cb, rotation);

  const CacheView view{l, cache.v.data(), num_blocks};
  const Status v = validate_encode(view, e);
  if (v.message().find('\n') != std::string::npos) fail("encode: validation message spans lines");
  if (!real_cache) return 0;

  const std::vector<std::uint8_t> before = cache.v;
  const Status r = encode_reference(view, e);
  if (r.code() != v.code()) fail("encode: encode_reference and validate_encode disagree");
  if (!r.ok()) {
    if (cache.v != before) fail("encode: reference wrote cache bytes on error");
    return 0;
  }
  const std::vector<std::uint8_t> mask = slot_byte_mask(l, num_blocks, slot_values);
  if (mask != turboquant::testing::oracle_slot_mask(l, num_blocks, slot_values)) {
    fail("encode: the slots' bytes (BlockLayout) differ from the spec's slot map");
  }
  bool finite_input = true;
  for (std::int64_t i = 0; i < e.num_tokens * l.num_kv_heads * dims && finite_input; ++i) {
    finite_input = std::isfinite(detail::load_element(keys.v.data(), e.dtype, i)) &&
                   std::isfinite(detail::load_element(values.v.data(), e.dtype, i));
  }
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (!mask[i] && cache.v[i] != before[i]) fail("encode: a byte outside the stored slots changed");
  }
  if (finite_input && (custom_cb ? std::isfinite(cb.centroids[0]) : true)) {
    for (std::int64_t slot : slot_values) {
      if (slot < 0) continue;
      const std::uint8_t* block = cache.v.data() + l.block_base(slot / l.block_size);
      const int t = static_cast<int>(slot % l.block_size);
      for (int h = 0; h < l.num_kv_heads; ++h) {
        for (MetaField f : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
          if (f == MetaField::kKeyNorm && l.format.fp8_keys()) continue;
          if (f == MetaField::kKeyNorm && (custom_cb || dense_rot)) continue;  // a user table may be degenerate
          if (!std::isfinite(core::read_meta(l, block, t, h, f))) fail("encode: non-finite fp16 metadata from finite input");
        }
      }
    }
  }
#ifdef TQ_FUZZ_HAVE_CPU
  Exact cache_cpu(before.size());
  cache_cpu.v = before;
  CpuOptions options;
  options.threads = 1 + (mode >> 7);
  const Status s = encode_cpu(CacheView{l, cache_cpu.v.data(), num_blocks}, e, options);
  if (s.code() != r.code()) fail("encode: encode_cpu and encode_reference disagree on the status");
  if (cache_cpu.v != cache.v) fail("encode: encode_cpu bytes differ from encode_reference");
#endif
  return 0;
}

}  // namespace tq_fuzz
