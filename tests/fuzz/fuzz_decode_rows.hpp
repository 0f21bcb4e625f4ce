// Fuzz target: decode with multi-token rows (query_start_loc), attention sinks
// and sliding windows (issue 13), over random cache bytes, and the per-sequence
// dequantize over the same arguments (fuzz_dequantize_sequences). The input draws a
// layout, per-sequence q_len and seq_len, and then damages what it likes: a
// query_start_loc that starts above 0, decreases, ends off num_query_rows or
// gives q_len > seq_len or > kMaxQueryLen; non-finite or huge sinks; negative
// or huge windows; buffers a few bytes short. Every buffer is exactly as long
// as its `bytes` (fuzz_decode.hpp's Exact), so a validation gap is an ASan
// report. Invariants:
//   - validate_decode, decode_reference and decode_cpu return the same status
//     code and a one-line message; nothing is written on error;
//   - on success the CPU backend's bits equal the reference's on NaN-free rows
//     (output and LSE);
//   - the contract's definition of multi-token rows (docs/ARITHMETIC.md §7):
//     the reference's multi-token decode equals, bit for bit, the same rows
//     decoded as single-token sequences (block table row repeated, seq_len =
//     the row's position + 1, the same window and sinks), NaN rows included.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz/fuzz_decode.hpp"

namespace tq_fuzz {

// The rows of one input beyond which it is not decoded (validation still runs).
inline constexpr std::int64_t kMaxRowsWork = std::int64_t{1} << 18;  // attended tokens x q heads x dims

// What one input damages (at most one thing, in half of the inputs).
enum class Damage { kNone, kStart, kRows, kShortBuffer, kWindow, kSinks, kBlockId, kQLen };

inline Damage fuzz_damage(Input& in) {
  const std::uint8_t d = in.u8();
  return d % 2 == 0 ? Damage::kNone : static_cast<Damage>(1 + (d >> 1) % 7);
}

// dequantize_sequences (vLLM's continuation-prefill form, issue 13) over a
// decode's cache, block table and seq_lens, with max_seq, dtype and basis from
// the input and outputs exactly as long as they claim (sometimes short),
// prefilled with a canary. Invariants: validate_dequantize_sequences and
// dequantize_sequences_reference agree on the status, with a one-line message;
// nothing is written on error; on success position j < seq_lens[b] of
// sequence b holds, for every KV head, the bytes dequantize_reference gives
// for its slot, and every other position keeps the canary.
inline void fuzz_dequantize_sequences(Input& in, const turboquant::ConstCacheView& view,
                                      const turboquant::DecodeArgs& a, int capacity) {
  using namespace turboquant;
  const BlockLayout& l = view.layout;
  DequantizeSequencesArgs d;
  d.block_table = a.block_table;
  d.batch = a.batch;
  d.max_blocks_per_seq = a.max_blocks_per_seq;
  d.seq_lens = a.seq_lens;
  d.max_seq = in.flag() ? capacity : static_cast<int>(in.range(-1, capacity + 1));
  d.out_dtype = static_cast<DType>(in.u8() % 3);
  d.basis = in.flag() ? Basis::kRotated : Basis::kOriginal;
  const std::int64_t hk = l.num_kv_heads, dims = l.format.head_dim, es = dtype_size(d.out_dtype);
  const std::int64_t bytes = checked_product({d.batch, hk, d.max_seq, dims, es});
  const bool shorten = in.u8() % 8 == 0;
  Exact keys(sized(bytes, in, shorten), 0xA5), values(sized(bytes, in, false), 0xA5);
  d.keys = {keys.data(), keys.size()};
  d.values = {values.data(), values.size()};
  const Status v = validate_dequantize_sequences(view, d);
  const Status s = dequantize_sequences_reference(view, d);
  if (s.code() != v.code()) fail("dequantize_sequences: reference and validation disagree");
  if (s.message().find('\n') != std::string::npos) fail("dequantize_sequences: message spans lines");
  const auto canary = [](const Exact& e, std::size_t from, std::size_t n) {
    for (std::size_t i = from; i < from + n; ++i) {
      if (e.v[i] != 0xA5) return false;
    }
    return true;
  };
  if (!s.ok()) {
    if (!canary(keys, 0, keys.size()) || !canary(values, 0, values.size())) fail("dequantize_sequences: wrote on error");
    return;
  }
  // The slots of every stored position, dequantized as a list.
  std::vector<std::int64_t> slots;
  const auto* lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  const auto* table = static_cast<const std::int32_t*>(a.block_table.data);
  for (int b = 0; b < d.batch; ++b) {
    for (int j = 0; j < lens[b]; ++j) {
      slots.push_back(std::int64_t{table[std::int64_t{b} * d.max_blocks_per_seq + j / l.block_size]} * l.block_size +
                      j % l.block_size);
    }
  }
  DequantizeArgs list;
  list.num_slots = static_cast<std::int64_t>(slots.size());
  list.slots = {slots.data(), slots.size() * 8};
  std::vector<std::uint8_t> want_k(slots.size() * hk * dims * es), want_v(want_k.size());
  list.keys = {want_k.data(), want_k.size()};
  list.values = {want_v.data(), want_v.size()};
  list.out_dtype = d.out_dtype;
  list.basis = d.basis;
  if (!dequantize_reference(view, list).ok()) fail("dequantize_sequences: the list form refuses the same slots");
  const std::size_t row = static_cast<std::size_t>(dims * es);
  std::size_t next = 0;  // index into slots
  for (int b = 0; b < d.batch; ++b) {
    for (std::int64_t h = 0; h < hk; ++h) {
      for (int j = 0; j < d.max_seq; ++j) {
        const std::size_t at = static_cast<std::size_t>(((b * hk + h) * d.max_seq + j)) * row;
        if (j >= lens[b]) {
          if (!canary(keys, at, row) || !canary(values, at, row)) fail("dequantize_sequences: wrote past seq_lens[b]");
          continue;
        }
        const std::size_t from = static_cast<std::size_t>((next + j) * hk + h) * row;
        if (std::memcmp(keys.v.data() + at, want_k.data() + from, row) != 0 ||
            std::memcmp(values.v.data() + at, want_v.data() + from, row) != 0) {
          fail("dequantize_sequences: a position differs from the list form of its slot");
        }
      }
    }
    next += static_cast<std::size_t>(lens[b]);
  }
}

inline int fuzz_decode_rows(const std::uint8_t* data, std::size_t size) {
  using namespace turboquant;
  Input in(data, size);
  const std::uint8_t mode = in.u8();
  const bool with_qsl = (mode & 0x01) == 0;  // else one row per sequence
  const bool with_sinks = mode & 0x02;
  const bool raw_query = (mode & 0x1c) == 0x1c;  // raw query bytes (NaN/Inf likely), check_finite off
  const Damage damage = fuzz_damage(in);

  BlockLayout l;
  l.format = fuzz_format(in);
  l.block_size = static_cast<int>(in.range(1, 40));
  l.num_kv_heads = static_cast<int>(in.range(1, 3));
  const bool layout_ok = validate_layout(l).ok();
  const int group = static_cast<int>(in.range(1, 5));
  const int dims = l.format.head_dim;

  DecodeArgs a;
  a.num_q_heads = layout_ok ? l.num_kv_heads * group : group;
  a.batch = static_cast<int>(in.range(0, 4));
  a.max_blocks_per_seq = static_cast<int>(in.range(1, 6));
  static const int kSplits[] = {1, 2, 3, 7, 16, 32};
  a.num_splits = in.pick(kSplits);
  a.softmax_scale = in.flag() ? static_cast<float>(in.range(1, 64)) / 32.0f : 0.125f;
  a.query_dtype = static_cast<DType>(in.u8() % 3);
  a.out_dtype = static_cast<DType>(in.u8() % 3);
  a.check_finite = !raw_query;
  static const int kWindows[] = {-1, -2, -4096, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), 1, 4096};
  a.sliding_window = damage == Damage::kWindow ? in.pick(kWindows) : in.flag() ? 0 : static_cast<int>(in.range(1, 64));

  const std::int64_t num_blocks = in.range(1, 10);
  const std::int64_t cache_bytes = layout_ok ? checked_product({num_blocks, l.block_bytes()}) : 64;
  if (cache_bytes < 0 || static_cast<std::size_t>(cache_bytes) > kMaxCache) return 0;
  Exact cache(static_cast<std::size_t>(cache_bytes));
  fill_bytes(cache.v.data(), cache.size(), in.u32());
  const ConstCacheView view(l, cache.v.data(), num_blocks);

  // Sequences: a q_len (0 = vLLM's padding) and a seq_len that holds it (a
  // damaged one: q_len above seq_len, or above kMaxQueryLen).
  const int capacity = layout_ok ? l.block_size * a.max_blocks_per_seq : 0;
  std::vector<std::int32_t> q_lens(a.batch), lens(a.batch), starts(a.batch + 1, 0);
  const int damaged_seq = static_cast<int>(in.range(0, a.batch - 1));
  for (int b = 0; b < a.batch; ++b) {
    const std::uint8_t pick = in.u8();
    q_lens[b] = !with_qsl ? 1 : pick % 8 == 0 ? 0 : static_cast<int>(in.range(1, pick % 8 == 1 ? 24 : 6));
    lens[b] = static_cast<std::int32_t>(std::min(capacity, q_lens[b] + static_cast<int>(in.range(0, 48))));
    if (damage == Damage::kQLen && b == damaged_seq) {
      if (in.flag()) {
        lens[b] = q_lens[b] > 0 ? q_lens[b] - 1 : 0;
      } else {
        q_lens[b] = kMaxQueryLen + 1;
        lens[b] = std::min(capacity, q_lens[b]);
      }
    }
    starts[b + 1] = starts[b] + q_lens[b];
  }
  std::int64_t T = with_qsl ? starts[a.batch] : a.batch;
  if (damage == Damage::kStart && with_qsl) {  // above 0, decreasing, or wild; T follows the last
    const int at = static_cast<int>(in.range(0, a.batch));
    const std::uint8_t how = in.u8();
    starts[at] = how % 3 == 0 ? in.wild_i32() : clamp32(std::int64_t{starts[at]} + (how % 3 == 1 ? 1 : -1) * in.range(1, 3));
    T = std::clamp<std::int64_t>(starts[a.batch], 0, 4096);
  }
  if (damage == Damage::kRows) T = std::max<std::int64_t>(0, T + (in.flag() ? 1 : -1));
  a.num_query_rows = static_cast<int>(T);
  // The q_lens the (possibly damaged) starts give: what a decode that
  // validation accepts uses, and what the expanded rows below repeat.
  for (int b = 0; b < a.batch; ++b) q_lens[b] = clamp32(std::int64_t{starts[b + 1]} - starts[b]);

  const std::int64_t rows = T * a.num_q_heads;
  const bool shorten = damage == Damage::kShortBuffer;
  const int short_one = static_cast<int>(in.range(0, 5));
  Exact query(sized(checked_product({rows, dims, std::int64_t(dtype_size(a.query_dtype))}), in, shorten && short_one == 0));
  Exact out(sized(checked_product({rows, dims, std::int64_t(dtype_size(a.out_dtype))}), in, shorten && short_one == 1), 0xA5);
  // An empty lse is valid (not asked for).
  Exact lse(in.u8() % 8 == 0 ? 0 : sized(checked_product({rows, 4}), in, shorten && short_one == 2), 0xA5);
  Exact seq_lens(sized(std::int64_t{4} * a.batch, in, shorten && short_one == 3));
  Exact qsl(with_qsl ? sized(std::int64_t{4} * (a.batch + 1), in, shorten && short_one == 4) : 0);
  Exact sinks(with_sinks ? sized(std::int64_t{4} * a.num_q_heads, in, shorten && short_one == 5) : 0);
  Exact table(static_cast<std::size_t>(4 * a.batch * a.max_blocks_per_seq));
  fill_floats(query, a.query_dtype, in, in.flag() ? 1.0f : 100.0f, raw_query);
  const auto copy_ints = [](Exact& to, const std::vector<std::int32_t>& from) {
    const std::size_t n = std::min<std::size_t>(to.size(), 4 * from.size());
    if (n > 0) std::memcpy(to.v.data(), from.data(), n);
  };
  copy_ints(seq_lens, lens);
  copy_ints(qsl, starts);
  const std::size_t bad_sink = damage == Damage::kSinks ? 4 * static_cast<std::size_t>(in.range(0, a.num_q_heads - 1)) : SIZE_MAX;
  for (std::size_t i = 0; i + 4 <= sinks.size(); i += 4) {
    static const float kBadSinks[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                      -std::numeric_limits<float>::infinity(), 3e38f, -1e38f};
    const float x = i == bad_sink ? in.pick(kBadSinks) : static_cast<float>(static_cast<std::int8_t>(in.u8())) * 80.0f;
    std::memcpy(sinks.v.data() + i, &x, 4);  // about +-1e4, or a damaged one
  }
  const std::size_t bad_block = damage == Damage::kBlockId ? 4 * static_cast<std::size_t>(in.range(0, table.size() / 4)) : SIZE_MAX;
  for (std::size_t i = 0; i + 4 <= table.size(); i += 4) {
    const std::int32_t block = i == bad_block ? (in.flag() ? clamp32(num_blocks) : -1)
                                              : static_cast<std::int32_t>(in.range(0, num_blocks - 1));
    std::memcpy(table.v.data() + i, &block, 4);
  }
  a.query = {query.data(), query.size()};
  a.out = {out.data(), out.size()};
  a.lse = {lse.data(), lse.size()};
  a.seq_lens = {seq_lens.data(), seq_lens.size()};
  a.block_table = {table.data(), table.size()};
  if (with_qsl) a.query_start_loc = {qsl.data(), qsl.size()};
  if (with_sinks) a.sinks = {sinks.data(), sinks.size()};

  fuzz_dequantize_sequences(in, view, a, capacity);

  const Status v = validate_decode(view, a);
  if (v.message().find('\n') != std::string::npos) fail("decode rows: validation message spans lines");
  if (v.ok()) {
    std::int64_t attended = 0;
    for (int b = 0; b < a.batch; ++b) attended += std::int64_t{q_lens[b]} * (lens[b] + 1);
    if (checked_product({attended + T, a.num_q_heads, dims}) > kMaxRowsWork) return 0;
  }

  if (!check_reference_and_cpu(view, a, v, out, lse, 1 + (mode >> 7)).ok()) return 0;

  // The same rows as single-token sequences with their synthetic lengths.
  if (!with_qsl || T == 0) return 0;
  DecodeArgs e = a;
  std::vector<std::int32_t> e_lens, e_table;
  for (int b = 0; b < a.batch; ++b) {
    for (int i = 0; i < q_lens[b]; ++i) {
      e_lens.push_back(lens[b] - q_lens[b] + i + 1);
      const auto* row = reinterpret_cast<const std::int32_t*>(table.v.data()) + std::int64_t{b} * a.max_blocks_per_seq;
      e_table.insert(e_table.end(), row, row + a.max_blocks_per_seq);
    }
  }
  Exact e_out(out.size(), 0xA5), e_lse(lse.size(), 0xA5);  // an empty lse stays empty
  e.batch = static_cast<int>(T);
  e.num_query_rows = 0;
  e.query_start_loc = {};
  e.seq_lens = {e_lens.data(), e_lens.size() * 4};
  e.block_table = {e_table.data(), e_table.size() * 4};
  e.out = {e_out.data(), e_out.size()};
  e.lse = {e_lse.data(), e_lse.size()};
  const Status x = decode_reference(view, e);
  if (!x.ok()) fail("decode rows: the expanded single-token rows are refused");
  if (e_out.v != out.v) fail("decode rows: multi-token output differs from the expanded single-token rows");
  if (e_lse.v != lse.v) fail("decode rows: multi-token LSE differs from the expanded single-token rows");
  return 0;
}

}  // namespace tq_fuzz
