// Row r of a decode (docs/ARITHMETIC.md §7): its sequence and the positions it
// attends to. Without query_start_loc row r is sequence r at position
// seq_lens[r] - 1; with it, the sequence b with query_start_loc[b] <= r <
// query_start_loc[b + 1] (binary search; sequences of q_len 0 own no row), at
// position seq_lens[b] - q_len_b + (r - query_start_loc[b]). The split plan of
// the row is core::row_split_range over the attended range, as in the golden
// model, so a single-token row without a window is split exactly as before
// (core::split_range of seq_len).
#pragma once

#include "params.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

struct QueryRow {
  int b;                     // the row's sequence (its block table row and seq_len)
  core::TokenRange attended;  // positions [begin, end)
};

__device__ __forceinline__ QueryRow query_row(const DecodeParams& p, int r) {
  if (p.query_start_loc == nullptr) return {r, core::attended_range(p.seq_lens[r] - 1, p.sliding_window)};
  int lo = 0, hi = p.batch;  // the last b with query_start_loc[b] <= r
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.query_start_loc[mid] <= r) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int start = p.query_start_loc[lo];
  const int q_len = p.query_start_loc[lo + 1] - start;
  return {lo, core::attended_range(p.seq_lens[lo] - q_len + (r - start), p.sliding_window)};
}

}  // namespace turboquant::cuda::detail
