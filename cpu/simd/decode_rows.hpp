// The work item of several query rows of one sequence (query_start_loc:
// speculative decoding, chunked prefill): rows [r0, r1), KV head h, split s of
// each row's own plan (docs/ARITHMETIC.md §7). The rows' split-s ranges
// overlap (they differ by the causal end, the window start and, where
// split_len(n) differs, by a few tokens per split), so their union is walked
// once: each tile of 16 tokens is read and dequantized once for all the rows
// (the few tokens where the unions of neighbouring split indices overlap are
// read by both items), keys and values to fp32, into a ring of kRowsRing
// tokens that stays in L1/L2. After every kRowsChunk tokens, each row folds all
// of its own tiles that end in what is decoded: tiles of 16 from its split's
// first token, exactly as the one-row item (decode_kernel.hpp) forms them, so
// every row gets the same dot16 lanes (dot_floats on the decoded key =
// dot_token on its codes), the same fold and the same value fmas in the same
// order, hence the same bits. A row's tile ends in the current chunk and
// starts at most 15 tokens before it, so the ring of two chunks always holds
// it; where every row's tiles start on chunk boundaries (the usual case), one
// chunk of the ring is used, and a tile's ring pointers are set up once for
// all the rows that fold it.
#pragma once

#include <cstdint>

#include "decode_kernel.hpp"

namespace turboquant::cpu::simd {

template <class A>
struct DecodeRowsKernels : DecodeKernels<A> {
  using K = DecodeKernels<A>;
  using typename K::F;
  using typename K::S;
  using typename K::Scratch;
  using K::R;
  using K::W;
  using K::for_head_blocks;
  template <int KeyBits, int VBits>
  using TileConstants = typename K::template TileConstants<KeyBits, VBits>;
  static_assert(kRowsChunk % kTile == 0 && kRowsRing == 2 * kRowsChunk, "whole tiles; a tile spans two chunks at most");

  // Scratch of a rows item (decode_rows_scratch_floats): the ring (keys,
  // values, norms), each row's softmax state, then the one-row item's Scratch
  // (shared by the rows: it holds one tile's temporaries).
  struct RowsScratch {
    float* keys;     // [kRowsRing][head_dim], 64-byte aligned rows
    float* values;   // [kRowsRing][head_dim]
    float* norms;    // [kRowsRing]: key norms (corrected for AoS _nc); 1 for FP8
    float* row_max;  // [rows][group]
    float* row_sum;  // [rows][group]
    Scratch tile;
    RowsScratch(float* base, int dims, int group)
        : keys(base),
          values(keys + kRowsRing * dims),
          norms(values + kRowsRing * dims),
          row_max(norms + kRowsRing),
          row_sum(row_max + kMaxItemRows * group),
          tile(row_sum + kMaxItemRows * group, group) {}
    // The tile scratch with row j's softmax state.
    Scratch of_row(int j, int group) const {
      Scratch s = tile;
      s.run_max = row_max + j * group;
      s.run_sum = row_sum + j * group;
      return s;
    }
  };

  // Decodes walker tile t (tokens starting at ring slot `slot`, a multiple of
  // 16) into the ring: keys and values to fp32, the norms of the tile.
  template <int KeyBits, int VBits>
  static void decode_tile(const DecodeProblem& p, const TileWalker<A>& walker, const TileRecords& t,
                          const TileConstants<KeyBits, VBits>& tc, const RowsScratch& rs, int slot) {
    const core::Format& f = p.layout.format;
    const int dims = f.head_dim;
    const int n = t.n;
    const Scratch& sc = rs.tile;
    F norms[R];
    alignas(64) float vscale[kTile];
    alignas(64) float vzero[kTile];
    K::template tile_meta<KeyBits>(walker, t, norms, vscale, vzero);
    const bool correct = KeyBits != 8 && f.norm_corrected_at_decode();
    const std::uint32_t scalar = K::template scalar_keys<KeyBits>(f, t);
    for (int i = 0; i < n; ++i) {
      float* key = rs.keys + std::int64_t{slot + i} * dims;
      if ((scalar >> i) & 1u) {
        fallback::decode_fp8(f.fp8_format, t.key[i], dims, key);
      } else if (correct) {
        K::template decode_key<KeyBits, true>(t.key[i], tc.key_table, dims, key, sc.red_self, S::slot_of(i));
      } else {
        K::template decode_key<KeyBits, false>(t.key[i], tc.key_table, dims, key, nullptr, 0);
      }
    }
    if (correct) {
      K::clear_slots(sc.red_self, 1, n);
      K::correct_norms(sc.red_self, norms);
    }
    for (int r = 0; r < R; ++r) (KeyBits == 8 ? F(1.0f) : norms[r]).store_aligned(rs.norms + slot + r * W);

    const std::uint8_t* vals[kTile];
    for (int i = 0; i < n; ++i) vals[i] = t.key[i] + f.value_record_offset();
    K::value_tables(tc.codes_f, vscale, vzero, n, sc.vt);
    const typename K::template CodedValues<VBits> coded{vals, sc.vt};
    for (int i = 0; i < n; ++i) {
      float* value = rs.values + std::int64_t{slot + i} * dims;
      for (int c = 0; c < dims / 16; ++c) {
        F v[R];
        coded(i, c, v);
        for (int r = 0; r < R; ++r) v[r].store_aligned(value + 16 * c + r * W);
      }
    }
  }

  // A tile's tokens in the ring: n tokens from ring slot `slot`, wrapping
  // (n = 0: not pointed yet, or the ring has changed since).
  struct RingTile {
    int slot = -1;
    int n = 0;
    const float* keys[kTile];
    const float* values[kTile];
    alignas(64) float norm[kTile];
    void point(const RowsScratch& rs, int dims, int first_slot, int count) {
      slot = first_slot;
      n = count;
      for (int i = 0; i < kTile; ++i) norm[i] = 0.0f;
      for (int i = 0; i < n; ++i) {
        const int at = (slot + i) % kRowsRing;
        keys[i] = rs.keys + std::int64_t{at} * dims;
        values[i] = rs.values + std::int64_t{at} * dims;
        norm[i] = rs.norms[at];
      }
    }
  };

  // One tile of row `row` (the tokens of rt): the one-row item's steps on the
  // decoded keys and values.
  template <int KeyBits>
  static void row_tile(const DecodeProblem& p, const RingTile& rt, const Scratch& sc, const F* lanes, int row, int h,
                       int s, bool first) {
    const int dims = p.head_dim();
    const int group = p.group;
    const int n = rt.n;
    const float* queries = p.query(row, h * group);
    for_head_blocks(group, [&]<int HB>(int g0) {
      K::template decoded_keys_tile<HB>(rt.keys, n, queries + std::int64_t{g0} * dims, dims,
                                        sc.red + g0 * kTile * S::kSlotFloats);
    });
    K::clear_slots(sc.red, group, n);
    F norms[R];
    for (int r = 0; r < R; ++r) norms[r] = F::load_aligned(rt.norm + r * W);
    K::template fold_tile<KeyBits>(sc, group, n, norms, lanes);
    const std::int64_t acc_stride = p.partials.acc_row_stride();
    float* part = p.acc(row, h * group, s);
    for_head_blocks(group, [&]<int HB>(int g0) {
      K::template values_tile<HB>(typename K::DecodedValues{rt.values}, n, dims, sc.probs + g0 * kTile, sc.alpha + g0,
                                  part + g0 * acc_stride, acc_stride, first);
    });
  }

  template <int KeyBits, int VBits>
  static void rows_item(const DecodeProblem& p, int r0, int r1, int h, int s, float* scratch) {
    const int rows = r1 - r0;
    core::TokenRange range[kMaxItemRows];
    int next[kMaxItemRows];  // each row's next tile
    core::TokenRange all{0, 0};  // the union of the rows' ranges (a superset where they do not touch)
    for (int j = 0; j < rows; ++j) {
      range[j] = p.token_range(r0 + j, s);
      next[j] = range[j].begin;
      if (range[j].empty()) continue;
      all = all.empty() ? range[j]
                        : core::TokenRange{range[j].begin < all.begin ? range[j].begin : all.begin,
                                           range[j].end > all.end ? range[j].end : all.end};
    }
    if (all.empty()) return;
    // Where every row's tiles start on a chunk boundary (no window, the same
    // split length: the usual rows), each tile lies in one chunk and is
    // folded before the next chunk is decoded, so one chunk of the ring is
    // enough: a smaller working set in L1.
    bool aligned = true;
    for (int j = 0; j < rows; ++j) aligned &= range[j].empty() || (range[j].begin - all.begin) % kRowsChunk == 0;
    const int ring = aligned ? kRowsChunk : kRowsRing;
    const int dims = p.head_dim();
    const int group = p.group;
    const RowsScratch rs(scratch, dims, group);
    for (int j = 0; j < rows; ++j) K::start_states(rs.of_row(j, group), group);
    const TileConstants<KeyBits, VBits> tc(p);

    TileWalker<A> walker(p, r0, h, all);
    TileRecords tiles[3];
    walker.next(tiles[0]);
    walker.next(tiles[1]);
    int decoded = all.begin;  // tokens [all.begin, decoded) have been decoded
    RingTile rt;              // the last tile's ring pointers, shared by the rows whose tile it is too
    for (int k = 0; tiles[k % 3].n > 0; ++k) {
      const TileRecords& t = tiles[k % 3];
      walker.next(tiles[(k + 2) % 3]);
      decode_tile(p, walker, t, tc, rs, (decoded - all.begin) % ring);
      rt.n = 0;  // its norms may have been overwritten
      decoded += t.n;
      if ((decoded - all.begin) % kRowsChunk != 0 && decoded < all.end) continue;
      for (int j = 0; j < rows; ++j) {
        const Scratch sc = rs.of_row(j, group);
        for (; next[j] < range[j].end; next[j] += kTile) {
          const int n = range[j].end - next[j] < kTile ? range[j].end - next[j] : kTile;
          if (next[j] + n > decoded) break;
          const int slot = (next[j] - all.begin) % ring;
          if (slot != rt.slot || n != rt.n) rt.point(rs, dims, slot, n);
          row_tile<KeyBits>(p, rt, sc, tc.lanes, r0 + j, h, s, next[j] == range[j].begin);
        }
      }
    }
    for (int j = 0; j < rows; ++j) {
      if (!range[j].empty()) K::store_states(p, rs.of_row(j, group), r0 + j, h, s);
    }
  }

  // The rows item for the call's format.
  static void decode_rows(const DecodeProblem& p, int r0, int r1, int h, int s, float* scratch) {
    core::visit_bits(p.layout.format, [&]<int KB, int VB>() { rows_item<KB, VB>(p, r0, r1, h, s, scratch); });
  }
};

}  // namespace turboquant::cpu::simd
