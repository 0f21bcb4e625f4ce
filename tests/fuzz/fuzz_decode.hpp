// Fuzz target: decode (and dequantize) over arbitrary cache bytes, block
// tables, seq_lens and arguments. The input picks a (valid or invalid) layout
// (SoA or AoS, e4m3 or e4b15 FP8 keys, out-of-range enum values) and arguments; every
// buffer is allocated at exactly the size its `bytes` field claims, so a
// validation gap turns into an AddressSanitizer report instead of passing
// silently. Invariants:
//   - validate_decode, decode_reference (and decode_cpu where it exists)
//     return the same status code; nothing is written on error;
//   - a "fake" cache (num_blocks larger than the memory behind it, up to
//     2^62) is only validated, never decoded: validation alone must be free of
//     overflow (UBSan) and must accept block ids up to num_blocks - 1;
//   - the CPU backend's output bits equal the reference's on rows where both
//     are free of NaN (ARITHMETIC.md: NaN rows from garbage cache bytes are
//     unspecified);
//   - for every valid layout (block_size and num_kv_heads up to 4096), the
//     library's address map (core::BlockLayout) names, at slots and heads the
//     input picks, the bytes the spec-written slot map of the float64 oracle
//     (tests/common/f64_oracle.hpp) names, inside the block.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/f64_oracle.hpp"
#include "fuzz/fuzz_input.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/turboquant.hpp"
#if __has_include("turboquant/cpu.hpp")
#include "turboquant/cpu.hpp"
#define TQ_FUZZ_HAVE_CPU 1
#endif

namespace tq_fuzz {

// A buffer whose heap block is exactly `bytes` long (ASan sees every overrun).
struct Exact {
  std::vector<std::uint8_t> v;
  explicit Exact(std::size_t n = 0, std::uint8_t fill = 0) : v(n, fill) {}
  void* data() { return v.empty() ? nullptr : v.data(); }
  std::size_t size() const { return v.size(); }
};

// Bounds per input: large enough for every layout and a few blocks, small
// enough for ~1000 executions per second (the first campaign, with 1 MiB
// caches and 2^21 work, ran at 140/s).
inline constexpr std::size_t kMaxBuffer = std::size_t{1} << 18;  // per buffer
inline constexpr std::size_t kMaxCache = std::size_t{1} << 18;
inline constexpr std::int64_t kMaxWork = std::int64_t{1} << 19;  // tokens x q heads x dims per input

// a * b * c ... in int64, or -1 on overflow / negative factors.
inline std::int64_t checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (std::int64_t f : factors) {
    if (f < 0) return -1;
    if (f != 0 && p > std::numeric_limits<std::int64_t>::max() / f) return -1;
    p *= f;
  }
  return p;
}

// Honest size when it is small enough, else a small buffer (validation must
// then reject the call, since `bytes` is always the true size).
inline std::size_t sized(std::int64_t want, Input& in, bool shorten) {
  std::size_t n = want < 0 || static_cast<std::size_t>(want) > kMaxBuffer ? in.range(0, 64) : static_cast<std::size_t>(want);
  if (shorten && n > 0) n -= static_cast<std::size_t>(in.range(1, n < 8 ? n : 8));
  return n;
}

inline std::int32_t clamp32(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, std::numeric_limits<std::int32_t>::min(),
                                                            std::numeric_limits<std::int32_t>::max()));
}

// The layout and the FP8 flavour come from the high bits of the byte that
// picks the preset, so that corpus files written before they existed keep
// every later read: bit 3 AoS, bit 4 e4b15 (FP8 keys); bits 5-7 all set give
// an invalid format instead (an enum value outside the enumeration, or e4b15
// on Lloyd-Max keys), which validation must reject.
inline turboquant::Format fuzz_format(Input& in) {
  using namespace turboquant;
  static const int kHeadDims[] = {32, 64, 32, 64, 128, 256, 512, 48, 96, 16, 0, -32, 33, 1024};
  const std::uint8_t choice = in.u8();
  const int preset = choice % 6;
  Format f;
  if (preset < 4) {
    f = core::preset_format(kAllPresets[preset], in.pick(kHeadDims));
  } else {
    static const int kKeyBits[] = {3, 4, 8, 2, 5, 0};
    static const int kValueBits[] = {3, 4, 2, 8};
    f.key_bits = in.pick(kKeyBits);
    f.value_bits = in.pick(kValueBits);
    f.norm_correction = in.flag();
    f.head_dim = preset == 4 ? in.pick(kHeadDims) : in.wild_i32();
  }
  f.layout = choice & 0x08 ? LayoutKind::kAoS : LayoutKind::kSoA;
  if (f.fp8_keys() && (choice & 0x10)) f.fp8_format = Fp8Format::kE4b15;
  if ((choice >> 5) == 7) {
    if (choice & 0x08) {
      f.layout = static_cast<LayoutKind>(2 + (choice & 0x07));
    } else {
      f.fp8_format = choice & 0x10 ? static_cast<Fp8Format>(2 + (choice & 0x07)) : Fp8Format::kE4b15;
    }
  }
  return f;
}

// The library's offsets of (t, h) against the oracle's spec-written slot map
// at the corners and inner points of the block (all 16 pairs); `l` is valid.
// It reads no input, so corpus files keep their meaning.
inline void check_address_map(const turboquant::BlockLayout& l) {
  using turboquant::MetaField;
  const turboquant::testing::OracleSlotMap m(l);
  if (l.block_bytes() != m.block_bytes()) fail("address map: block_bytes differs from the spec");
  if (l.used_block_bytes() > l.block_bytes()) fail("address map: used bytes exceed the block");
  const int bs = l.block_size, hk = l.num_kv_heads;
  for (int t : {0, bs - 1, bs / 2, bs * 5 / 7}) {
    for (int h : {0, hk - 1, hk / 2, hk * 3 / 5}) {
      if (l.key_data_offset(t, h) != m.key_at(t, h)) fail("address map: key offset differs from the spec");
      if (l.value_data_offset(t, h) != m.value_at(t, h)) fail("address map: value offset differs from the spec");
      if (l.value_data_offset(t, h) + l.format.value_data_bytes() > l.block_bytes()) fail("address map: value past the block");
      for (MetaField f : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
        if (f == MetaField::kKeyNorm && l.format.fp8_keys()) continue;
        const std::int64_t at = l.meta_field_offset(t, h, f);
        if (at != m.field_at(t, h, l.format.field_index(f))) fail("address map: metadata offset differs from the spec");
        if (at < 0 || at + 2 > l.block_bytes()) fail("address map: metadata past the block");
      }
    }
  }
}

// A user-made codebook: right or wrong bit count, finite or not, sorted or not.
inline turboquant::Codebook fuzz_codebook(Input& in, int key_bits) {
  turboquant::Codebook cb;
  cb.bits = in.flag() ? key_bits : static_cast<int>(in.range(0, 4));
  for (float& c : cb.centroids) c = in.flag() ? static_cast<float>(static_cast<std::int8_t>(in.u8())) / 64.0f : in.f32();
  for (float& m : cb.midpoints) m = in.flag() ? static_cast<float>(static_cast<std::int8_t>(in.u8())) / 64.0f : in.f32();
  return cb;
}

// The optional caller-supplied codebook and dense rotation of a decode or
// encode call (`a`), drawn from the input in this order; `cb` and `rotation`
// hold them and must outlive the call.
template <class Args>
void fuzz_codebook_and_rotation(Input& in, Args& a, int key_bits, int dims, bool custom_cb, bool dense_rot,
                                turboquant::Codebook& cb, Exact& rotation) {
  if (custom_cb) {
    cb = fuzz_codebook(in, key_bits);
    a.codebook = &cb;
  }
  if (dense_rot) {
    rotation = Exact(sized(checked_product({dims, dims, 4}), in, in.flag()));
    for (std::size_t i = 0; i + 4 <= rotation.size(); i += 4) {
      const float x = in.flag() ? in.f32() : static_cast<float>(static_cast<std::int8_t>(in.u8())) / 64.0f;
      std::memcpy(rotation.v.data() + i, &x, 4);
    }
    a.rotation = {rotation.data(), rotation.size()};
  }
}

inline void fill_floats(Exact& buf, turboquant::DType t, Input& in, float magnitude, bool raw) {
  const std::size_t es = turboquant::dtype_size(t);
  for (std::size_t i = 0; i + es <= buf.size(); i += es) {
    if (raw) {
      for (std::size_t j = 0; j < es; ++j) buf.v[i + j] = in.u8();
      continue;
    }
    const float x = static_cast<float>(static_cast<std::int8_t>(in.u8())) / 16.0f * magnitude;
    turboquant::detail::store_element(buf.v.data(), t, static_cast<std::int64_t>(i / es), x);
  }
}

// decode_reference on `a` (validated as `v`), then decode_cpu where it exists,
// on `threads` threads: both return validation's status code; neither writes
// on error; the CPU backend's bits equal the reference's on the rows where
// neither output has a NaN (ARITHMETIC.md: NaN rows from garbage cache bytes
// are unspecified), output and, where one was asked for, LSE. `out` and `lse`
// (an empty lse: none asked for) hold the reference's results afterwards;
// returns its status.
inline turboquant::Status check_reference_and_cpu(const turboquant::ConstCacheView& view,
                                                  const turboquant::DecodeArgs& a, const turboquant::Status& v,
                                                  Exact& out, Exact& lse, int threads) {
  using namespace turboquant;
  const std::vector<std::uint8_t> out_before = out.v, lse_before = lse.v;
  turboquant::DecodeArgs ref = a;
  ref.out = {out.data(), out.size()};
  ref.lse = {lse.data(), lse.size()};
  const Status r = decode_reference(view, ref);
  if (r.code() != v.code()) fail("decode: decode_reference and validate_decode disagree");
  if (!r.ok() && (out.v != out_before || lse.v != lse_before)) fail("decode: reference wrote output on error");
#ifdef TQ_FUZZ_HAVE_CPU
  Exact out_cpu(out.size(), 0xA5), lse_cpu(lse.size(), 0xA5);
  DecodeArgs c = a;
  c.out = {out_cpu.data(), out_cpu.size()};
  c.lse = {lse_cpu.data(), lse_cpu.size()};
  CpuOptions options;
  options.threads = threads;
  const Status s = decode_cpu(view, c, options);
  if (s.code() != r.code()) fail("decode: decode_cpu and decode_reference disagree on the status");
  if (!s.ok()) {
    if (out_cpu.v != out_before || lse_cpu.v != lse_before) fail("decode: decode_cpu wrote output on error");
    return r;
  }
  const int dims = view.layout.format.head_dim;
  const std::size_t row_bytes = static_cast<std::size_t>(dims) * dtype_size(a.out_dtype);
  for (std::size_t row = 0; row_bytes > 0 && (row + 1) * row_bytes <= out.size(); ++row) {
    bool nan = false;
    for (int d = 0; d < dims; ++d) {
      const std::int64_t i = static_cast<std::int64_t>(row) * dims + d;
      nan |= std::isnan(detail::load_element(out.v.data(), a.out_dtype, i)) ||
             std::isnan(detail::load_element(out_cpu.v.data(), a.out_dtype, i));
    }
    if (nan) continue;
    if (std::memcmp(out.v.data() + row * row_bytes, out_cpu.v.data() + row * row_bytes, row_bytes) != 0) {
      fail("decode: decode_cpu output bits differ from decode_reference on a NaN-free row");
    }
    if (lse.size() < 4 * (row + 1)) continue;
    float x, y;
    std::memcpy(&x, lse.v.data() + 4 * row, 4);
    std::memcpy(&y, lse_cpu.v.data() + 4 * row, 4);
    if (!std::isnan(x) && !std::isnan(y) && std::memcmp(&x, &y, 4) != 0) fail("decode: LSE bits differ");
  }
#else
  (void)threads;
#endif
  return r;
}

inline int fuzz_decode(const std::uint8_t* data, std::size_t size) {
  using namespace turboquant;
  Input in(data, size);
  const std::uint8_t mode = in.u8();
  const bool wild = mode & 0x01;        // raw ints for shapes
  const bool fake = mode & 0x02;        // num_blocks beyond the memory: validate only
  const bool custom_cb = mode & 0x04;   // caller codebook
  const bool dense_rot = mode & 0x08;   // caller rotation
  const bool shorten = mode & 0x10;     // one buffer a few bytes short
  const bool no_check = mode & 0x20;    // check_finite = false
  const bool raw_values = mode & 0x40;  // raw bytes for query floats (NaN/Inf likely)

  BlockLayout l;
  l.format = fuzz_format(in);
  l.block_size = wild ? in.wild_i32() : static_cast<int>(in.range(1, 48));
  l.num_kv_heads = wild ? in.wild_i32() : static_cast<int>(in.range(1, 4));
  const bool layout_ok = validate_layout(l).ok();
  if (layout_ok) check_address_map(l);
  const int group = static_cast<int>(in.range(1, 8));

  DecodeArgs a;
  a.num_q_heads = wild ? in.wild_i32() : (layout_ok ? l.num_kv_heads * group + (in.u8() == 7 ? 1 : 0) : group);
  a.batch = wild ? in.wild_i32() : static_cast<int>(in.range(0, 4));
  a.max_blocks_per_seq = wild ? in.wild_i32() : static_cast<int>(in.range(0, 6));
  static const int kSplits[] = {1, 2, 3, 7, 16, 32, 1024, 0, 1025, -1};
  a.num_splits = in.flag() ? in.pick(kSplits) : static_cast<int>(in.range(1, 40));
  a.softmax_scale = in.flag() ? in.f32() : 0.125f;
  a.query_dtype = static_cast<DType>(in.u8() % 3);
  a.out_dtype = static_cast<DType>(in.u8() % 3);
  a.check_finite = !no_check;
  const int shorten_which = static_cast<int>(in.range(0, 4));

  std::int64_t num_blocks;
  if (fake) {
    num_blocks = in.wild_i64();
  } else {
    num_blocks = in.range(1, 12);
  }
  const std::int64_t block_bytes = layout_ok ? l.block_bytes() : 0;
  const std::int64_t cache_bytes = checked_product({num_blocks, block_bytes});
  const bool real_cache = !fake && layout_ok && cache_bytes >= 0 && static_cast<std::size_t>(cache_bytes) <= kMaxCache;
  Exact cache(real_cache ? static_cast<std::size_t>(cache_bytes) : 64);
  fill_bytes(cache.v.data(), cache.size(), in.u32());
  const ConstCacheView view(l, cache.v.data(), num_blocks);

  const int dims = l.format.head_dim;
  const std::int64_t rows = checked_product({a.batch, a.num_q_heads});
  Exact query(sized(checked_product({rows, dims, std::int64_t(dtype_size(a.query_dtype))}), in, shorten && shorten_which == 0));
  Exact out(sized(checked_product({rows, dims, std::int64_t(dtype_size(a.out_dtype))}), in, shorten && shorten_which == 1), 0xA5);
  const bool with_lse = in.u8() % 4 != 0;
  Exact lse(with_lse ? sized(checked_product({rows, 4}), in, shorten && shorten_which == 2) : 0, 0xA5);
  Exact seq_lens(sized(checked_product({a.batch, 4}), in, shorten && shorten_which == 3));
  Exact table(sized(checked_product({a.batch, a.max_blocks_per_seq, 4}), in, shorten && shorten_which == 4));

  static const float kMagnitudes[] = {1.0f, 1.0f, 100.0f, 1e4f, 1e6f, 1e30f};
  fill_floats(query, a.query_dtype, in, in.pick(kMagnitudes), raw_values);
  const std::int64_t max_len = std::min<std::int64_t>(
      layout_ok ? std::int64_t{l.block_size} * std::max(a.max_blocks_per_seq, 0) : 0, std::numeric_limits<std::int32_t>::max());
  for (std::size_t i = 0; i + 4 <= seq_lens.size(); i += 4) {
    const std::int32_t v = in.flag() ? in.wild_i32() : static_cast<std::int32_t>(in.range(0, max_len));
    std::memcpy(seq_lens.v.data() + i, &v, 4);
  }
  for (std::size_t i = 0; i + 4 <= table.size(); i += 4) {
    std::int32_t v;
    switch (in.u8() % 8) {
      case 0: v = in.wild_i32(); break;
      case 1: v = clamp32(num_blocks - (num_blocks > std::numeric_limits<std::int64_t>::min() ? 1 : 0));
        break;  // the last valid block (INT32_MAX for a fake cache of more blocks)
      case 2: v = clamp32(num_blocks); break;  // one past the end
      default: v = static_cast<std::int32_t>(in.range(0, num_blocks > 1 ? std::min<std::int64_t>(num_blocks - 1, 1 << 20) : 0));
    }
    std::memcpy(table.v.data() + i, &v, 4);
  }
  a.query = {query.data(), query.size()};
  a.out = {out.data(), out.size()};
  if (with_lse) a.lse = {lse.data(), lse.size()};
  a.seq_lens = {seq_lens.data(), seq_lens.size()};
  a.block_table = {table.data(), table.size()};

  Codebook cb;
  Exact rotation;
  fuzz_codebook_and_rotation(in, a, l.format.key_bits, dims, custom_cb, dense_rot, cb, rotation);

  const Status v = validate_decode(view, a);
  if (v.message().find('\n') != std::string::npos) fail("decode: validation message spans lines");
  if (!real_cache) return 0;  // never decode a cache that is not all there

  // Dequantize over the same cache: wild slot counts, slots in and out of range.
  {
    DequantizeArgs d;
    d.num_slots = in.flag() ? in.wild_i64() : in.range(0, 6);
    const std::int64_t kv = checked_product({d.num_slots, l.num_kv_heads, dims, 4});
    Exact slots(sized(checked_product({d.num_slots, 8}), in, false));
    Exact keys(sized(kv, in, shorten)), values(sized(kv, in, false));
    for (std::size_t i = 0; i + 8 <= slots.size(); i += 8) {
      const std::int64_t slot = in.flag() ? in.wild_i64() : in.range(0, layout_ok ? num_blocks * l.block_size : 0);
      std::memcpy(slots.v.data() + i, &slot, 8);
    }
    d.slots = {slots.data(), slots.size()};
    d.keys = {keys.data(), keys.size()};
    d.values = {values.data(), values.size()};
    d.basis = in.flag() ? Basis::kRotated : Basis::kOriginal;
    d.codebook = a.codebook;
    d.rotation = a.rotation;
    const Status s = dequantize_reference(view, d);
    if (s.message().find('\n') != std::string::npos) fail("dequantize: message spans lines");
  }

  // Bound the work of one input (validation already ran on every input).
  std::int64_t tokens = 0;
  if (v.ok()) {
    for (int b = 0; b < a.batch; ++b) {
      std::int32_t len;
      std::memcpy(&len, seq_lens.v.data() + 4 * b, 4);
      tokens += len;
    }
    const std::int64_t work = checked_product({tokens + a.batch, a.num_q_heads, dims});
    if (work < 0 || work > kMaxWork) return 0;
    if (checked_product({a.batch, a.num_q_heads, a.num_splits}) > (1 << 16)) return 0;
  }
  // Bound the memory of one input: the reference keeps num_splits x group x
  // head_dim floats of partials even for batch 0 (finding F9).
  const std::int64_t partial_floats = checked_product({std::max(a.num_q_heads, 0), a.num_splits, dims});
  if (partial_floats < 0 || partial_floats > (std::int64_t{1} << 24)) return 0;

  (void)check_reference_and_cpu(view, a, v, out, lse, 1 + (mode >> 7));
  return 0;
}

}  // namespace tq_fuzz
