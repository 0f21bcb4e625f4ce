// Strict decode for grids too small to fill the GPU (e.g. one sequence): W
// warps share ONE split instead of one warp per split, bit-exact with
// decode_reference exactly like strict_decode_kernel (same split plan, same
// per-tile functions, same order of every operation).
//
// The split's tiles go in groups of W (tile k of a group belongs to warp k):
//   phase A   each warp stages its tile (cp.async, double-buffered by group,
//             issued one group ahead) and computes its scores with
//             strict_tile_scores into the shared scores[k];
//   barrier
//   phase B   every warp folds the group's tiles into the softmax state in tile
//             order (strict_softmax_tile; the W warps compute identical states)
//             and accumulates the values of its own D / W dims for all heads
//             (strict_tile_values): the ordered chains are per (dim, head), so
//             splitting the dims across warps keeps each chain's order.
// The scores of a group are thus computed W-wide in parallel and the value
// chains are W times shorter per warp; what is repeated per warp is the
// softmax of each tile (its max and sum chains and 16 H exponentials).
#pragma once

#include "query_rows.cuh"

#include "query_prep.cuh"
#include "strict_phases.cuh"

namespace turboquant::cuda::detail {

// Warps per split: the value dims split evenly, at least one dim per lane.
template <int D>
inline constexpr int kSplitWarps = D / 32 < 4 ? D / 32 : 4;

template <int D, int KB, int VB, int H, class C>
struct StrictSplitShared : StrictRecord<D, KB, VB, C> {
  using Record = StrictRecord<D, KB, VB, C>;
  static constexpr int W = kSplitWarps<D>;
  static constexpr int kRow = Record::kRow;
  alignas(16) std::uint32_t raw[2][W][core::kTileTokens][kRow];  // [group buffer][tile of the group]
  alignas(16) float4 meta[2][W][core::kTileTokens];              // (value scale, value zero, key norm, -)
  alignas(16) float scores[W][H][core::kTileTokens];
  alignas(16) float probs[W][core::kTileTokens][H];  // each warp's own copy (phase B)
  alignas(16) float q[H][D];
  alignas(16) float scratch[H][D];  // dense query rotation
};

// Grid (plan_splits, Hk x chunks, batch), W warps; dynamic shared memory
// sizeof(StrictSplitShared<D, KB, VB, H, C>); C: CacheKind.
template <int D, int KB, int VB, int H, class C>
__global__ void __launch_bounds__(32 * kSplitWarps<D>) strict_split_kernel(DecodeParams p) {
  using Shared = StrictSplitShared<D, KB, VB, H, C>;
  using Record = typename Shared::Record;
  constexpr int W = Shared::W;
  constexpr int kT = core::kTileTokens;
  constexpr int E = D / (32 * W);  // value dims per lane in phase B
  extern __shared__ __align__(16) std::uint8_t strict_split_smem[];
  Shared& sm = *reinterpret_cast<Shared*>(strict_split_smem);

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int split = blockIdx.x;
  const StrictBlockHeads<H> blk(p);
  const core::Format& f = p.layout.format;
  const QueryRow row = query_row(p, blk.b);
  const core::TokenRange range = core::row_split_range(row.attended, p.plan_splits, split);
  if (range.empty()) return;  // the whole block: the merge skips empty splits

  __shared__ float centroids[core::kMaxCodebookSize];  // static: constant address (strict_decode_kernel)
  if (threadIdx.x < core::kMaxCodebookSize) centroids[threadIdx.x] = p.codebook.centroids[threadIdx.x];
  prepare_queries<D, H, kSplitWarps<D>>(p, blk.first_row, blk.heads, &sm.q[0][0], &sm.scratch[0][0]);  // ends with a barrier

  const int tg = lane >> 4;
  float qr[H][D / 16];
  load_strict_query<D, H>(sm.q, blk.heads, lane & 15, qr);
  core::SoftmaxState state;
  float acc[H][E] = {};
  const TreeSlots<H> slots(lane);
  const int first_dim = warp * (D / W) + E * lane;  // this lane's value dims in phase B
  const int value_bit = Record::kValueOffset * 8 + VB * first_dim;

  // This warp's tile of a group starting at g0 is [g0 + warp kT, + kT); n is warp-uniform.
  const StrictTileSource<Record> src(p, row.b, range, blk.kv_head, lane);
  const int tl = lane & 15;
  const auto tile_tokens = [&range](int tile_start) { return max(0, min(kT, range.end - tile_start)); };

  constexpr int kGroup = W * kT;  // tokens per group
  int blk_next;  // block id of this lane's token in the next tile
  float4 meta_cur;
  {
    const int mine = range.begin + warp * kT;
    const int blk0 = src.block_of(mine);
    const std::uint8_t* rec0 = src.record_of(mine, blk0);  // shares t % block_size with meta_of
    const int n = tile_tokens(mine);
    if (n > 0) src.stage(sm.raw[0][warp], rec0, n);
    cp_async_commit();
    meta_cur = src.meta_of(mine, blk0);
    blk_next = src.block_of(mine + kGroup);
  }

  const auto shift = src.template row_shift<C>();
  int buf = 0;
  for (int g0 = range.begin; g0 < range.end; g0 += kGroup, buf ^= 1) {
    const int mine = g0 + warp * kT;
    const int n_mine = tile_tokens(mine);
    const float4 meta_now = meta_cur;
    const int next = mine + kGroup;
    const std::uint8_t* rec_next = nullptr;
    if (next < range.end) {
      rec_next = src.record_of(next, blk_next);
      meta_cur = src.meta_of(next, blk_next);
      blk_next = src.block_of(next + kGroup);
    }
    __syncthreads();  // phase B of the previous group is done: its buffers and scores are free
    const int n_next = tile_tokens(next);
    if (n_next > 0) src.stage(sm.raw[buf ^ 1][warp], rec_next, n_next);
    cp_async_commit();
    if (tg == 0) {  // rows past the tile's end get zero metadata (shift 0: row_shift_bytes)
      src.stage_meta(sm.meta[buf][warp][tl], sm.raw[buf][warp][tl],
                     tl < n_mine ? meta_now : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    }
    cp_async_wait<1>();  // this warp's tile of the group has landed
    __syncwarp();
    // Phase A: this warp's scores.
    if (n_mine > 0) {
      strict_tile_scores<Record, H>(shift, sm.raw[buf][warp], qr, centroids, f, sm.meta[buf][warp], slots, lane,
                                    sm.scores[warp]);
    }
    __syncthreads();  // the group's records, metadata and scores are visible to every warp
    // Phase B: the group's tiles in order, this warp's dims.
#pragma unroll 1
    for (int k = 0; k < W; ++k) {
      const int n = tile_tokens(g0 + k * kT);
      if (n <= 0) break;
      const float alpha = strict_softmax_tile<H>(sm.scores[k], sm.probs[warp], n, lane, state);
      strict_tile_values<E, H, Record>(shift, acc, alpha, sm.raw[buf][k], sm.meta[buf][k], sm.probs[warp], n,
                                       value_bit);
      __syncwarp();  // probs[warp] is rewritten by the next tile
    }
  }
  strict_write_partial<D, H, E>(p, blk, split, acc, first_dim, state, warp == 0, lane);
}

}  // namespace turboquant::cuda::detail
