// The wide fast decode: multi-token rows with more than 32 (row, head)
// columns per (sequence, KV head), up to kWideColumns per block, reading and
// dequantizing each K/V tile once for all of them.
//
// The fast kernel (fast_decode.cuh) keeps a block's columns as the mma's N and
// each warp's O^T fragments in registers, 32 per 8 columns at D 128, so a block
// holds at most 16 columns and q_len 16 at GQA 4 (64 columns) reads and
// dequantizes every tile four times. Here the roles turn around, as in
// FlashAttention-2: the columns are the mma's M, 16 per warp, and the tile is
// dequantized once per block into shared memory as fp16, the B operand of both
// products: on sm_90a one warpgroup mma (wgmma.cuh) per 16-deep k-step for all
// four warps' 64 columns, reading B straight from shared memory; elsewhere each
// warp's mma.sync on B fragments it loads with ldmatrix:
//   S = Q K^T   A: the warp's 16 query columns (registers, prepared once),
//               B: K [token][dim] (64 tokens per step);
//   O = P V     A: the probabilities times the tokens' value scales
//               (registers, from S's accumulators), B: V^T [dim][token], exact
//               integer codes; the zero points add sum(p * zero) per column.
// Four warps; a step covers 64 tokens, one 16-token tile per warp, each warp
// streaming its tiles through the fast kernel's pipeline (tile i goes to warp
// i % 4; tensor copies, FastTensorLoader, or cp.async, FastTileLoader, as
// decode_setup.hpp's WideLoader says) and dequantizing it with
// the fast kernel's stage readers and fragments into the step's shared-memory
// tiles (wide_tiles.cuh). Two barriers per step: the tile is written, then read.
// With wgmma and two V^T tiles (WideSmem::kValueBuffers) a step's O product
// runs while the warps write the next step's tiles; the next S product waits
// for it.
// The online softmax runs once per 64 tokens. The partials go to the same
// workspace as the fast kernel's, and merge_kernel finishes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fast_loader.cuh"
#include "fast_stage.cuh"
#include "wide_step.cuh"

namespace turboquant::cuda::detail {

// maps: the tensor maps of T::kTensorCopy's copies (unused otherwise; a
// __grid_constant__, as fast_decode_kernel's).
template <class T>
__global__ void __launch_bounds__(32 * kWideWarps, 2)
    wide_decode_kernel(const __grid_constant__ FastTensorMaps maps, DecodeParams p) {
  using S = WideSmem<T>;
  constexpr int D = T::kDim;
  extern __shared__ __align__(16) std::uint8_t wide_smem[];
  // Tensor copies write 128-byte aligned stages: the start rounded up (the
  // launch's kAlignSlack).
  std::uint8_t* const smem =
      T::kTensorCopy ? wide_smem + (T::kWorkAlign - smem_addr(wide_smem) % T::kWorkAlign) % T::kWorkAlign : wide_smem;
  __half* k_tile = reinterpret_cast<__half*>(smem + S::kKOffset);
  __half* const v_tiles = reinterpret_cast<__half*>(smem + S::kVOffset);
  float* meta = reinterpret_cast<float*>(smem + S::kMetaOffset);
  std::uint8_t* lut = smem + S::kLutOffset;
  __shared__ std::uint32_t centroid_half[16];

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  WideWork work;
  if (!wide_work<T>(p, split, kv_head, work)) return;
  const FastRows& rows = work.rows;
  const core::TokenRange& range = work.range;
  const FastColumns& cols = work.cols;
  const int steps = work.steps;
  const std::int32_t* block_row = p.block_table + std::int64_t{rows.b} * p.max_blocks_per_seq;

  const WarpTiles tiles = warp_tiles(range, T::kTile, warp, kWideWarps);
  const int my_tiles = tiles.count;
  std::uint8_t* const stages = smem + warp * T::kStages * T::kStageBytes;
  using Loader = std::conditional_t<T::kTensorCopy, FastTensorLoader<T>, FastTileLoader<T>>;
  Loader loader = [&] {
    if constexpr (T::kTensorCopy) {
      auto* bars = reinterpret_cast<std::uint64_t*>(smem + S::kBarOffset) + warp * T::kStages;
      return Loader(p, &maps, block_row, tiles, kv_head, lane, bars);
    } else {
      return Loader(p, block_row, tiles, kv_head, lane);
    }
  }();
  std::uint8_t* issue_stage = issue_first_stages<T>(loader, stages, my_tiles);

  if constexpr (!T::kFp8) build_pair_table<T>(p, lut, centroid_half, tid);
  // The block's columns, prepared in the K and V^T tiles (ends with a barrier).
  float* prep = reinterpret_cast<float*>(smem + S::kKOffset);
  prepare_query_rows<D, kWideColumns, kWideWarps>(p, cols.count, [&](int k) { return cols.row(k); }, prep, nullptr);
  const int k0 = 16 * warp + g, k1 = k0 + 8;  // the lane's two columns
  std::uint32_t qa[T::kKSteps][4];
  wide_query_fragments<T>(prep, cols, k0, k1, c, qa);
  const WideMask mask = wide_mask<T>(p, rows, cols, k0, k1);
  // wgmma takes the whole warpgroup: a warp past the block's columns computes
  // rows that are never written (their query is 0, their masks empty).
  const bool has_columns = 16 * warp < cols.count;
  WideRowState<D> w;
  wide_clear_state(w);
  const std::uint32_t lut_lane_off = static_cast<std::uint32_t>((lane % T::kLutCopies) * 4);

  auto run = [&](const auto& stage) {
    std::uint8_t* const last_stage = stages + (T::kStages - 1) * T::kStageBytes;
    const std::uint8_t* st = stages;
    for (int step = 0; step < steps; ++step) {
      const int step_tok = range.begin + step * S::kStep;
      const int tok0 = step_tok + warp * T::kTile;
      const bool mine = step < my_tiles;
      __half* const v_tile = v_tiles + step % S::kValueBuffers * (S::kTileBytes / 2);
#if TURBOQUANT_HAVE_WGMMA
      if constexpr (S::kValueBuffers == 1) wgmma_wait_all();  // the previous O product read this V^T tile
#endif
      if (mine) {
        loader.wait();
        __syncwarp();
        if (step + T::kStages - 1 < my_tiles) loader.issue(issue_stage);
        loader.commit();
        issue_stage = issue_stage == last_stage ? stages : issue_stage + T::kStageBytes;
      }
      // Every warp is done reading the previous step's K and metadata (and the
      // prepared query), and the V^T tile of two steps back (its O product
      // waited for with the previous S product).
      __syncthreads();
      if (mine) {
        wide_dequantize<T>(stage, st, lut, lut_lane_off, tok0, min(T::kTile, range.end - tok0), rows.attended.begin,
                           warp * T::kTile, k_tile, v_tile, meta, g, c);
        st = st == last_stage ? stages : st + T::kStageBytes;
      } else {
        wide_clear<T>(warp * T::kTile, v_tile, meta, lane);
      }
#if TURBOQUANT_HAVE_WGMMA
      fence_shared_for_async();  // wgmma reads the tiles through the async proxy
#endif
      __syncthreads();  // the step's K, V^T and metadata are written
      if (TURBOQUANT_HAVE_WGMMA || has_columns) wide_step<T>(w, qa, k_tile, v_tile, meta, step_tok, range.end, mask, lane, [] {});
    }
  };
  with_stage<T>(p, kv_head, g, c, run);
#if TURBOQUANT_HAVE_WGMMA
  wgmma_wait_all();  // the last O product
  wgmma_pin(w.o);
#endif
  loader.drain();
  pdl_launch_dependents();

  // The warp's O goes to shared memory (the K and V^T tiles, read by every
  // warp until here), then out.
  __syncthreads();
  wide_write_partials<T>(p, w, reinterpret_cast<float*>(smem + S::kKOffset), cols, split, warp, lane);
}

}  // namespace turboquant::cuda::detail
