// Row r of a decode (docs/ARITHMETIC.md §7): its sequence and the positions it
// attends to. Without query_start_loc row r is sequence r at position
// seq_lens[r] - 1; with it, the sequence b with query_start_loc[b] <= r <
// query_start_loc[b + 1] (binary search; sequences of q_len 0 own no row), at
// position seq_lens[b] - q_len_b + (r - query_start_loc[b]). The split plan of
// the row is core::row_split_range over the attended range, as in the golden
// model, so a single-token row without a window is split exactly as before
// (core::split_range of seq_len).
//
// Fast mode groups rows (FastRows): a block takes up to fast_rows_per_block
// consecutive rows of one sequence, so that (rows x query heads) fill the mma's
// N = 8 columns and each K/V tile is read once for all of them.
#pragma once

#include "fast_plan.hpp"
#include "params.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

struct QueryRow {
  int b;                     // the row's sequence (its block table row and seq_len)
  core::TokenRange attended;  // positions [begin, end)
};

// The last b in [0, batch) with key(b) <= x, for a key nondecreasing in b with key(0) <= x.
template <class Key>
__device__ __forceinline__ int last_sequence_at_or_below(int batch, int x, Key key) {
  int lo = 0, hi = batch;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (key(mid) <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Position of query token i of sequence b (query_start_loc given).
__device__ __forceinline__ int query_position(const DecodeParams& p, int b, int i) {
  const int q_len = p.query_start_loc[b + 1] - p.query_start_loc[b];
  return p.seq_lens[b] - q_len + i;
}

__device__ __forceinline__ QueryRow query_row(const DecodeParams& p, int r) {
  if (p.query_start_loc == nullptr) return {r, core::attended_range(p.seq_lens[r] - 1, p.sliding_window)};
  const int b = last_sequence_at_or_below(p.batch, r, [&](int s) { return p.query_start_loc[s]; });
  return {b, core::attended_range(query_position(p, b, r - p.query_start_loc[b]), p.sliding_window)};
}

// ---- fast mode's row groups ----------------------------------------------

// The rows of one fast block: `count` consecutive rows of sequence b from
// `first` (count 0: an idle block), the union of their attended ranges, and
// the origin of the block's splits: the union's begin rounded down to a tile,
// so that every tile starts at a multiple of 16 tokens.
struct FastRows {
  int b, first, count;
  core::TokenRange attended;
  int base;
  // The block's split `split` of `splits` (fast_split_range over [base, attended.end)).
  __device__ __forceinline__ core::TokenRange split_range(int splits, int split) const {
    const core::TokenRange r = fast_split_range(attended.end - base, splits, split);
    return core::TokenRange{base + r.begin, base + r.end};
  }
  __device__ __forceinline__ int nonempty_splits(int splits) const {
    return plan_nonempty(true, attended.end - base, splits);
  }
};

// Group j of sequence b's rows.
__device__ __forceinline__ FastRows fast_rows(const DecodeParams& p, int b, int j) {
  FastRows f{};
  f.b = b;
  if (p.query_start_loc == nullptr) {  // row b is sequence b
    f.first = b;
    f.count = 1;
    f.attended = core::attended_range(p.seq_lens[b] - 1, p.sliding_window);
  } else {
    const int start = p.query_start_loc[b];
    const int i = j * p.fast_rows_per_block;
    f.first = start + i;
    f.count = max(0, min(p.fast_rows_per_block, p.query_start_loc[b + 1] - f.first));
    if (f.count == 0) return f;
    const int pos = query_position(p, b, i);  // the first row's; the last is pos + count - 1
    f.attended = core::TokenRange{core::attended_range(pos, p.sliding_window).begin, pos + f.count};
  }
  f.base = f.attended.begin / core::kTileTokens * core::kTileTokens;
  return f;
}

// The row of a single-token fast block z (no query_start_loc, no window): sequence z, all of it.
__device__ __forceinline__ FastRows fast_single_row(const DecodeParams& p, int z) {
  return FastRows{z, z, 1, core::TokenRange{0, p.seq_lens[z]}, 0};
}

// The rows of fast block z (blockIdx.z).
__device__ __forceinline__ FastRows fast_rows_of_block(const DecodeParams& p, int z) {
  if (p.query_start_loc == nullptr) return fast_rows(p, z, 0);
  const int R = p.fast_rows_per_block;
  const int b = last_sequence_at_or_below(p.batch, z, [&](int s) { return p.query_start_loc[s] / R + s; });
  return fast_rows(p, b, z - (p.query_start_loc[b] / R + b));
}

// The rows of the fast block that computed row r's partials (the merge's view).
__device__ __forceinline__ FastRows fast_rows_of_row(const DecodeParams& p, int r) {
  if (p.query_start_loc == nullptr) return fast_rows(p, r, 0);
  const int b = query_row(p, r).b;
  return fast_rows(p, b, (r - p.query_start_loc[b]) / p.fast_rows_per_block);
}

}  // namespace turboquant::cuda::detail
