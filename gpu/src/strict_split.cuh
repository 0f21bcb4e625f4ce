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

#include "strict_decode.cuh"

namespace turboquant::cuda::detail {

// Warps per split: the value dims split evenly, at least one dim per lane.
template <int D>
inline constexpr int kSplitWarps = D / 32 < 4 ? D / 32 : 4;

template <int D, int KB, int VB, int H>
struct StrictSplitShared {
  static constexpr int W = kSplitWarps<D>;
  static constexpr int kRow = StrictShared<D, KB, VB, H>::kRow;
  static constexpr int kKeyBytes = StrictShared<D, KB, VB, H>::kKeyBytes;
  static constexpr int kRecordBytes = StrictShared<D, KB, VB, H>::kRecordBytes;
  alignas(16) std::uint32_t raw[2][W][core::kTileTokens][kRow];  // [group buffer][tile of the group]
  alignas(16) float4 meta[2][W][core::kTileTokens];              // (value scale, value zero, key norm, -)
  alignas(16) float scores[W][H][core::kTileTokens];
  alignas(16) float probs[W][core::kTileTokens][H];  // each warp's own copy (phase B)
  alignas(16) float q[H][D];
  alignas(16) float scratch[H][D];  // dense query rotation
};

// Grid (plan_splits, Hk x chunks, batch), W warps; dynamic shared memory
// sizeof(StrictSplitShared<D, KB, VB, H>).
template <int D, int KB, int VB, int H>
__global__ void __launch_bounds__(32 * kSplitWarps<D>) strict_split_kernel(DecodeParams p) {
  using Shared = StrictSplitShared<D, KB, VB, H>;
  constexpr int W = Shared::W;
  constexpr int kT = core::kTileTokens;
  constexpr int kSteps = D / 16;  // dims per dot16 lane
  constexpr int E = D / (32 * W);  // value dims per lane in phase B
  extern __shared__ __align__(16) std::uint8_t strict_split_smem[];
  Shared& sm = *reinterpret_cast<Shared*>(strict_split_smem);

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const int seq_len = p.seq_lens[b];
  const int first_head = chunk * H;
  const int heads = min(H, p.group - first_head);
  const std::int64_t first_row = std::int64_t{b} * p.num_q_heads + kv_head * p.group + first_head;
  const core::TokenRange range = core::split_range(seq_len, p.plan_splits, split);
  if (range.empty()) return;  // the whole block: the merge skips empty splits

  __shared__ float centroids[core::kMaxCodebookSize];  // static: constant address (strict_decode_kernel)
  if (threadIdx.x < core::kMaxCodebookSize) centroids[threadIdx.x] = p.codebook.centroids[threadIdx.x];
  prepare_queries<D>(p, first_row, heads, &sm.q[0][0], &sm.scratch[0][0]);  // ends with a barrier

  const int j = lane & 15;
  const int tg = lane >> 4;
  float qr[H][kSteps];
  load_strict_query<D, H>(sm.q, heads, j, qr);
  core::SoftmaxState state;
  float acc[H][E] = {};
  const int first_dim = warp * (D / W) + E * lane;  // this lane's value dims in phase B
  const int value_bit = Shared::kKeyBytes * 8 + VB * first_dim;
  const TreeSlots<H> slots(lane);

  // This warp's tile of a group starting at g0 is [g0 + warp kT, + kT).
  const StrictTileSource src(p, b, range, kv_head, lane, Shared::kRecordBytes);
  const int tl = lane & 15;
  auto stage = [&](int buf, const std::uint8_t* rec, int n) {
    if (n > 0) src.stage(sm.raw[buf][warp], rec, n, Shared::kRecordBytes);  // n is warp-uniform
  };
  auto tile_tokens = [&](int tile_start) { return max(0, min(kT, range.end - tile_start)); };

  constexpr int kGroup = W * kT;  // tokens per group
  int blk_next;
  float4 meta_cur;
  {
    const int mine = range.begin + warp * kT;
    const int blk0 = src.block_of(mine);
    stage(0, src.record_of(mine, blk0), tile_tokens(mine));
    cp_async_commit();
    meta_cur = src.meta_of(mine, blk0);
    blk_next = src.block_of(mine + kGroup);
  }

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
    stage(buf ^ 1, rec_next, tile_tokens(next));
    cp_async_commit();
    if (tg == 0 && tl < n_mine) sm.meta[buf][warp][tl] = meta_now;
    cp_async_wait<1>();  // this warp's tile of the group has landed
    __syncwarp();
    // Phase A: this warp's scores.
    if (n_mine > 0) {
      strict_tile_scores<D, KB, H, Shared::kRow>(sm.raw[buf][warp], qr, centroids, f, sm.meta[buf][warp], slots,
                                                 lane, sm.scores[warp]);
    }
    __syncthreads();  // the group's records, metadata and scores are visible to every warp
    // Phase B: the group's tiles in order, this warp's dims.
#pragma unroll 1
    for (int k = 0; k < W; ++k) {
      const int n = tile_tokens(g0 + k * kT);
      if (n <= 0) break;
      const float alpha = strict_softmax_tile<H>(sm.scores[k], sm.probs[warp], n, lane, state);
      strict_tile_values<VB, E, H, Shared::kRow>(acc, alpha, sm.raw[buf][k], sm.meta[buf][k], sm.probs[warp], n,
                                                 value_bit);
      __syncwarp();  // probs[warp] is rewritten by the next tile
    }
  }

  pdl_launch_dependents();  // the merge grid may start launching (it waits for this grid)
  const std::int64_t first_partial = first_row * p.num_splits + split;  // (row, split) of head 0
#pragma unroll
  for (int g = 0; g < H; ++g) {
    if (g < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{g} * p.num_splits) * D + first_dim;
#pragma unroll
      for (int e = 0; e < E; ++e) dst[e] = acc[g][e];
    }
  }
  if (warp == 0 && lane < heads) {
    float* ml = p.partial_ml + (first_partial + std::int64_t{lane} * p.num_splits) * 2;
    ml[0] = state.max;
    ml[1] = state.sum;
  }
}

}  // namespace turboquant::cuda::detail
