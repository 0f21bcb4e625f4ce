// The fast kernel's mma columns (N = 8 per column tile, FastTraits::kColumns
// in all): the query heads of its head chunk for each of its rows (FastRows,
// query_rows.cuh), column k = head k % heads of row k / heads. A single-token decode has one row, so column k is head k, as
// before multi-token rows existed. Each column has its own attended range
// (causal rows, windows): FastColumnMask gives a lane's two score columns
// their ranges, and the tiles that need masking at all.
#pragma once

#include <climits>
#include <cstdint>

#include "query_rows.cuh"
#include "turboquant/core/softmax.hpp"

namespace turboquant::cuda::detail {

struct FastColumns {
  std::int64_t first_row;  // head row (query, partials) of column 0
  int heads;               // columns per query row (the head chunk)
  int count;               // rows x heads <= kColumns; columns past it are zero
  int num_q_heads;
  __device__ __forceinline__ std::int64_t row(int k) const {
    return first_row + std::int64_t{k / heads} * num_q_heads + k % heads;
  }
};

__device__ __forceinline__ FastColumns fast_columns(const DecodeParams& p, const FastRows& rows, int kv_head,
                                                    int first_head) {
  const int heads = min(p.heads_per_block, p.group - first_head);
  return FastColumns{std::int64_t{rows.first} * p.num_q_heads + kv_head * p.group + first_head, heads,
                     rows.count * heads, p.num_q_heads};
}

// The attended range of column k of a block whose first row sits at
// position first_pos: its row's (k / heads; columns past the block's take the
// last row's, last_row).
__device__ __forceinline__ core::TokenRange block_column_range(int first_pos, int last_row, int heads, int window,
                                                               int k) {
  return core::attended_range(first_pos + min(k / heads, last_row), window);
}

// Score masking of a block's columns. Inactive for one row without a
// window: every column then attends to the whole split. Block-uniform: the
// tiles that need masks (needed()) recompute a lane's two column ranges from
// the block's rows, so the tile loop keeps no per-lane ranges (eight
// registers for two column tiles, which made ptxas spill them in the
// twelve-warp instances).
struct FastColumnMask {
  bool active = false;
  int union_begin = 0;                    // before it no column attends (metadata unread)
  int all_begin = 0, all_end = INT_MAX;   // every column attends to [all_begin, all_end)
  int first_pos = 0;                      // position of the block's first row
  int last_row = 0;                       // the block's rows - 1
  int heads = 1;                          // columns per row
  int window = 0;

  // Whether the tile at tok0 has a token some column does not attend to.
  __device__ __forceinline__ bool needed(int tok0, int tile) const {
    return active && (tok0 < all_begin || tok0 + tile > all_end);
  }
  // The attended range of column k.
  __device__ __forceinline__ core::TokenRange range(int k) const {
    return block_column_range(first_pos, last_row, heads, window, k);
  }
  // Masks the scores s of column tile n in lane quad position c (tokens t,
  // t + 8; columns 8n + 2c, 8n + 2c + 1) and drops the metadata of tokens
  // before every column's range (their bytes may be anything: vLLM recycles
  // the blocks a window has left).
  __device__ __forceinline__ void apply(int n, int c, int t, float (&s)[4], float& scale0, float& zero0,
                                        float& scale1, float& zero1) const {
    const int k = kFastHeadsPerBlock * n + 2 * c;
    const core::TokenRange r0 = range(k), r1 = range(k + 1);
    const int u = t + 8;
    if (t < union_begin) scale0 = zero0 = 0.0f;
    if (u < union_begin) scale1 = zero1 = 0.0f;
    if (t < r0.begin || t >= r0.end) s[0] = -core::kInf;
    if (t < r1.begin || t >= r1.end) s[1] = -core::kInf;
    if (u < r0.begin || u >= r0.end) s[2] = -core::kInf;
    if (u < r1.begin || u >= r1.end) s[3] = -core::kInf;
  }
};

// The attended range of column k of the block's rows and columns.
__device__ __forceinline__ core::TokenRange column_range(const DecodeParams& p, const FastRows& rows,
                                                         const FastColumns& cols, int k) {
  return block_column_range(rows.attended.end - rows.count, rows.count - 1, cols.heads, p.sliding_window, k);
}

// The range every column of the block attends to: from the last row's begin
// (it starts latest) to the first row's end (it ends first).
__device__ __forceinline__ core::TokenRange columns_common_range(const DecodeParams& p, const FastRows& rows,
                                                                 const FastColumns& cols) {
  return core::TokenRange{column_range(p, rows, cols, cols.count - 1).begin, rows.attended.end - rows.count + 1};
}

// The block's mask.
__device__ __forceinline__ FastColumnMask fast_column_mask(const DecodeParams& p, const FastRows& rows,
                                                           const FastColumns& cols) {
  FastColumnMask m;
  if (p.query_start_loc == nullptr && p.sliding_window == 0) return m;
  m.active = true;
  m.union_begin = rows.attended.begin;
  const core::TokenRange all = columns_common_range(p, rows, cols);
  m.all_begin = all.begin;
  m.all_end = all.end;
  m.first_pos = rows.attended.end - rows.count;
  m.last_row = rows.count - 1;
  m.heads = cols.heads;
  m.window = p.sliding_window;
  return m;
}

}  // namespace turboquant::cuda::detail
