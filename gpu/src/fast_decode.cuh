// Fast decode: tensor cores (mma.sync m16n8k16, fp16 operands, fp32
// accumulation), relative L2 <= 1e-3 against the golden model.
//
// One block per (split, KV head x chunk of <= 8 query heads, sequence), eight
// warps (4-bit keys) or four. Tokens are the M = 16 rows and the query heads of
// the GQA group the N = 8 columns of every mma (S^T = K Q^T, O^T += V^T P^T),
// so each K/V byte is read once per group, the query stays in registers as B
// fragments, and a 16-token tile costs D/16 mma for the scores and D/16 for the
// values. Each warp streams its own 16-token tiles (tile i of the split goes to
// warp i % warps) through a 3-stage cp.async pipeline in shared memory and
// keeps its own online-softmax state; the warps' states are combined at the end
// into one partial per split, in the same workspace format as the strict kernel,
// and merge_kernel finishes. The first copies are issued before the query and
// table preparation, so their latency overlaps it.
//
// Dequantization happens in registers, straight into mma fragments:
//   keys   A operand of S^T, k = head_dim. Lane (g = lane/4, c = lane%4) owns
//          the contiguous dims [c*D/4, (c+1)*D/4) of tokens g and g + 8, i.e.
//          one contiguous byte chunk each (SoA; AoS: FastTraits::key_dim);
//          the query's B fragments use the same dim permutation. Lloyd-Max
//          codes go through a pair table in shared memory (one byte / 6 bits
//          -> two fp16 centroids, 32 interleaved copies against bank
//          conflicts); FP8 e4m3 converts exactly with cvt.f16x2.e4m3x2, e4b15
//          with integer ops. Scores are then multiplied by the fp16 key norm
//          of their token (the row).
//   values A operand of O^T, k = tokens. v = code * scale + zero is split as
//          code * (p * scale) + p * zero: the B operand is P^T * scale (the
//          score fragment, scaled per token row, transposed in registers with
//          movmatrix), the A operand the exact integer code (times a power of
//          two, undone at the end), and p * zero a per-head fp32 term added
//          once at the end. Lane g owns value chunk g (D/8 contiguous dims;
//          AoS: FastTraits::value_dim); rows g and g + 8 of m-tile j are its
//          local dims 2j and 2j + 1.
// The host picks the number of splits (fast_plan.hpp) for about one wave of
// blocks; ncu and the per-step history are in docs/PERFORMANCE.md.
//
// AoS caches (vLLM's token-major slots, 2-byte aligned): the loader stages
// the 16-byte units covering each slot, the stage reader (fast_stage.cuh)
// takes 4-byte words at the slot's phase, 4-bit / FP8 keys and 4-bit values
// dealt out to lanes in interleaved words (the query and the output use the
// same dim permutation), and the _nc presets' per-token norm correction needs
// each key's squared centroid norm: one more mma per k-step (the fragment's
// fp16 squares times ones), then core::decoded_key_norm once per lane.
//
// AoS slots of neighbouring KV heads share DRAM sectors and lines, so one
// head a block reads them up to 1.6x over when the heads' blocks drift apart.
// Two remedies: blocks of fused heads (kKvHeads > 1: a block takes several
// KV heads, its warps dealt out to them, so one block reads the heads' slots
// of a token range together; fast_plan.hpp's fast_fusable_heads, where their
// grid fills the device), or else, for one head a block (pace_capable: the tensor-copy and
// FP8 instances of one column tile, on devices of little DRAM bandwidth per
// SM), clusters of the KV heads' blocks of one split that keep pace with each
// other (cluster_pace.cuh).
//
// Loaders: the cp.async pipeline above, or, where the format and strides allow
// and the copies paid (tensor_box.hpp), tensor copies: one lane per warp
// issues a tile's boxes into the same stage rows, completing on a barrier.
//
// Units: fast_traits.cuh (tile sizes, stage and shared-memory layout, the
// dims of a lane), fast_loader.cuh (the cp.async pipeline), fast_stage.cuh
// (reading a staged tile, per layout), fast_fragments.cuh (dequantization
// into mma fragments), fast_mainloop.cuh (setup and the step of one tile),
// fast_epilogue.cuh (the warps' states into the split's partial).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cluster_pace.cuh"
#include "fast_epilogue.cuh"
#include "fast_loader.cuh"
#include "fast_mainloop.cuh"
#include "fast_plan.hpp"

namespace turboquant::cuda::detail {

// The warp's main loop over its tiles, reading stages through `stage`
// (kRows: the columns carry masks, fast_columns.cuh). rounds: the tiles of
// the block's busiest warp (the pacer's).
template <class T, bool kRows, class Stage, class Loader>
__device__ __forceinline__ void fast_tiles(FastWarpState<T> (&state)[T::kColumnTiles], Loader& loader,
                                           const FastTileInputs<T>& in, const Stage& stage, std::uint8_t* stages,
                                           std::uint8_t* issue_stage, core::TokenRange range, WarpTiles tiles,
                                           const ClusterPacer& pacer, int rounds, int g, int c) {
  std::uint8_t* const last_stage = stages + (T::kStages - 1) * T::kStageBytes;
  const std::uint8_t* st = stages;
  int tok0 = tiles.first;
  for (int it = 0; it < tiles.count; ++it) {
    pacer.before_tile(it);
    loader.wait();
    __syncwarp();
    if (it + T::kStages - 1 < tiles.count) loader.issue(issue_stage);
    loader.commit();
    issue_stage = issue_stage == last_stage ? stages : issue_stage + T::kStageBytes;
    fast_tile<T, kRows>(state, in, stage, st, tok0, min(T::kTile, range.end - tok0), g, c);
    st = st == last_stage ? stages : st + T::kStageBytes;
    tok0 += tiles.step;
  }
  if (pacer.every != 0) pacer.finish(tiles.count, rounds);
}

// kRows: the instance for query_start_loc rows and windows (FastRows); the
// other one is the single-token decode, whose columns are one row's heads and
// whose code has no masks (a register-free path: 1 us faster at 1 x 4096).
// kKvHeads: the KV heads of a block; more than one: fused heads
// (fast_plan.hpp: kKvHeads y .. kKvHeads y + kKvHeads - 1 along grid y,
// times the head chunks), warp w taking head w % kKvHeads and every
// (kWarps / kKvHeads)-th tile of the split from tile w / kKvHeads, so that
// one block reads the slots of neighbouring AoS heads, which share DRAM
// sectors and lines, together. The block then prepares its heads' queries in
// fp16 and combines only the warps of one head.
// maps: the tensor maps of T::kTensorCopy's copies (unused otherwise), a
// __grid_constant__ so that the copy engine reads them where the launch put
// them (64-byte aligned, as the first parameter).
template <class T, bool kRows, int kKvHeads = 1>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks)
    fast_decode_kernel(const __grid_constant__ FastTensorMaps maps, DecodeParams p) {
  static_assert(kKvHeads == 1 || (T::kFusableHeads && kKvHeads == T::kFusedKvHeads), "fused heads");
  constexpr int D = T::kDim;
  constexpr int kHeadWarps = T::kWarps / kKvHeads;  // warps of one KV head
  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint8_t* work = smem;
  if constexpr (T::kWorkAlign > 16) work += (T::kWorkAlign - smem_addr(smem) % T::kWorkAlign) % T::kWorkAlign;
  std::uint8_t* lut = smem + T::kLutOffset;
  float* prep = reinterpret_cast<float*>(smem + T::kPrepOffset);
  __shared__ std::uint32_t centroid_half[16];
  __shared__ float warp_max[kHeadWarps > 1 ? T::kWarps : 1][T::kColumns];
  __shared__ float warp_sum[kHeadWarps > 1 ? T::kWarps : 1][T::kColumns];
  __shared__ std::uint64_t stage_bars[T::kTensorCopy ? T::kWarps * T::kStages : 1];  // FastTensorLoader's

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int split = blockIdx.x;
  const int first_kv_head = blockIdx.y / p.chunks_per_kv_head * kKvHeads;
  const int head = warp % kKvHeads;  // of the block's KV heads
  const int kv_head = first_kv_head + head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const FastRows rows = kRows ? fast_rows_of_block(p, blockIdx.z) : fast_single_row(p, blockIdx.z);
  if (rows.count == 0) return;
  const core::TokenRange range = rows.split_range(p.plan_splits, split);
  if (range.empty()) return;
  const FastColumns cols = fast_columns(p, rows, kv_head, chunk * p.heads_per_block);
  // Column k of the warp's KV head: its head row (query, partials).
  auto my_row = [&](int k) { return kRows ? cols.row(k) : cols.first_row + k; };  // one row: contiguous heads
  // The same for the block's KV head h (the combine of a head's warps).
  auto column_row = [&](int h, int k) {
    const FastColumns hc = fast_columns(p, rows, first_kv_head + h, chunk * p.heads_per_block);
    return kRows ? hc.row(k) : hc.first_row + k;
  };
  const std::int32_t* block_row = p.block_table + std::int64_t{rows.b} * p.max_blocks_per_seq;

  const int g = lane >> 2;  // fragment row group: key tokens g and g + 8; value chunk g; query head g
  const int c = lane & 3;   // quad position: key chunk c; score columns (heads) 2c, 2c + 1
  const WarpTiles tiles = warp_tiles(range, T::kTile, warp / kKvHeads, kHeadWarps);
  const int rounds = (range.size() + T::kTile * T::kWarps - 1) / (T::kTile * T::kWarps);
  // Only pace_capable instances of one head a block are ever paced
  // (fast_grid.cpp's pace_cluster_for); the others compile the pacing out.
  constexpr bool kPaced = kKvHeads == 1 && pace_capable(T::kAos, T::kColumnTiles == 1, T::kTensorCopy, T::kFp8);
  const ClusterPacer pacer{kPaced && p.pace_cluster > 1 ? p.pace_tiles : 0};
  std::uint8_t* const stages = work + warp * T::kStages * T::kStageBytes;
  using Loader = std::conditional_t<T::kTensorCopy, FastTensorLoader<T>, FastTileLoader<T>>;
  Loader loader = [&] {
    if constexpr (T::kTensorCopy) {
      return Loader(p, &maps, block_row, tiles, kv_head, lane, stage_bars + warp * T::kStages);
    } else {
      return Loader(p, block_row, tiles, kv_head, lane);
    }
  }();

  // The pipeline's first stages go out before the preparation below.
  std::uint8_t* issue_stage = issue_first_stages<T>(loader, stages, tiles.count);

  // Queries: prepared in fp32 exactly as the golden model (fused heads keep
  // them in fp16, the fragments' precision).
  std::uint32_t qb[T::kColumnTiles][T::kKSteps][2];
  if constexpr (kKvHeads > 1) {
    // The first warp of each head prepares its columns in fp16, in the region
    // the pair table then takes.
    __half* q16 = reinterpret_cast<__half*>(lut + head * T::kHeadPrepBytes);
    if (warp < kKvHeads) prepare_warp_query_rows<D, T::kColumns>(p, cols.count, my_row, q16, lane);
    if constexpr (kHeadWarps > 1) __syncthreads();
    query_fragments<T>(q16, cols.count, g, c, qb);
    if constexpr (!T::kFp8) {
      // Its first barrier follows every warp's reads of the regions.
      build_pair_table<T>(p, lut, centroid_half, tid);
      __syncthreads();  // publishes the table
    }
  } else {
    if constexpr (!T::kFp8) build_pair_table<T>(p, lut, centroid_half, tid);
    // prepare_query_rows ends with a barrier, which also publishes the pair table.
    prepare_query_rows<D, T::kColumns, T::kWarps>(p, cols.count, my_row, prep, prep + T::kColumns * D);
    query_fragments<T>(prep, cols.count, g, c, qb);
  }
  FastTileInputs<T> in{lut, static_cast<std::uint32_t>((lane % T::kLutCopies) * 4), qb, {}};
  FastWarpState<T> state[T::kColumnTiles];
  if constexpr (kRows) in.mask = fast_column_mask(p, rows, cols);
#pragma unroll
  for (int n = 0; n < T::kColumnTiles; ++n) state[n].init();
  with_stage<T>(p, kv_head, g, c, [&](const auto& stage) {
    fast_tiles<T, kRows>(state, loader, in, stage, stages, issue_stage, range, tiles, pacer, rounds, g, c);
  });
  loader.drain();
  const FastPartialTarget target{split, cols.count};
  if constexpr (kHeadWarps == 1) {
    fast_write_warp_partial<T>(p, state, target, my_row, lane);
  } else if constexpr (kKvHeads == 1) {
    fast_write_partial<T, 1>(p, state, target, [&](int, int k) { return my_row(k); }, work, warp_max, warp_sum, tid);
  } else {
    fast_write_partial<T, kKvHeads>(p, state, target, column_row, work, warp_max, warp_sum, tid);
  }
}

}  // namespace turboquant::cuda::detail
