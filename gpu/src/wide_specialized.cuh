// The wide fast decode with warpgroups in roles (FlashAttention-3's split):
// two producer warpgroups stream and dequantize the tiles, two consumer
// warpgroups run the products and the online softmax.
//
// The wide kernel (wide_decode.cuh) has each warp both dequantize its 16
// tokens of a step and run the step's softmax: with its 220 registers and
// 111 KB of shared memory an SM holds two blocks, two warps a scheduler, and
// the step is latency-bound (PERFORMANCE.md round 23: 55% of the scheduler
// cycles issue nothing). Here a block of four warpgroups holds one SM:
//   producers (warps 0-3, 4-7): producer i writes the steps i, i + 2, ...:
//     each warp streams its tiles through a two-stage pipeline and writes
//     them, dequantized, into the step's buffer (the wide kernel's K, V^T
//     and metadata tiles, wide_dequantize); with fewer registers (setmaxnreg)
//     they leave the consumers more. One producer warpgroup bounded the step
//     (PERFORMANCE.md round 33): one dequantizing warp a scheduler;
//   consumers (warps 8-11, 12-15): consumer i runs the steps i, i + 2, ...
//     with the wide kernel's step (wide_step) for all 64 columns, the query
//     the S product's A operand from shared memory, and its own online
//     softmax; the two states merge at the end.
// Each step has its own buffer, kBuffers in a ring (two per consumer), each
// with a pair of named barriers between the step's producer and consumer:
// full (the producer's 128 threads arrive once the buffer is written; the
// consumer's 128 wait) and empty (the consumer arrives once its products
// have read the buffer, which it knows at its next step's S wait; the
// producer waits before writing the buffer's next step). So four warps a
// scheduler, and one consumer's softmax overlaps the other's products and
// the producers' dequantization.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fast_loader.cuh"
#include "fast_stage.cuh"
#include "warp_roles.cuh"
#include "wide_step.cuh"

namespace turboquant::cuda::detail {

// Producer warpgroups (step s: producer s % kWideProducers), then as many
// consumer warpgroups (step s: consumer s % kWideProducers).
inline constexpr int kWideProducers = 2;
inline constexpr int kWideRoleGroups = 2 * kWideProducers;
static_assert(kWideProducers == 2 && kWideSpecializedWarps == kWideRoleGroups * kWideWarps,
              "fast_plan.hpp's warps of the specialized blocks");
// Pipeline stages of a producer warp: it takes every other step's tile, so
// one tile in flight spans two steps.
inline constexpr int kWideProducerStages = 2;
// The traits the specialized blocks are built with: T's format and loader, a
// producer warpgroup's warps and stages.
template <class T>
using WideProducerTraits = WithWarpsAndStages<T, kWideWarps, kWideProducerStages>;
// Registers a thread after the split. The block's pool is what the launch
// gave it, kWideLaunchRegisters a thread (64 K over 512 threads, in whole 8s),
// and a group raising its count waits until the pool holds the registers:
// 256 P + 256 C must fit the pool, or a consumer would wait forever. The
// consumers read the query from shared memory (the S product's A by
// descriptor), not from 32 registers a thread.
inline constexpr int kWideLaunchRegisters = 65536 / (32 * kWideSpecializedWarps) / 8 * 8;  // 128
inline constexpr int kWideProducerRegisters = 96;
inline constexpr int kWideConsumerRegisters = 160;
static_assert(kWideWarps * 32 * kWideProducers * (kWideProducerRegisters + kWideConsumerRegisters) <=
                  32 * kWideSpecializedWarps * kWideLaunchRegisters,
              "the roles' registers fit the block's pool");
static_assert(kWideProducerRegisters % 8 == 0 && kWideConsumerRegisters % 8 == 0, "setmaxnreg takes multiples of 8");

// Shared memory of a block: the producer warps' pipeline stages, kBuffers
// step buffers (WideSmem's K and V^T tiles), their metadata, the pair table,
// and with tensor copies the stage barriers. The prepared query lives in the
// buffers before the loop; after it, the second consumer's state and the
// first's O rows.
template <class T>
struct WideSpecializedSmem {
  using S = WideSmem<T>;
  static constexpr int D = T::kDim;
  static constexpr int kConsumers = kWideProducers;
  static constexpr int kBuffers = 2 * kConsumers;  // buffer b: producer and consumer b % kWideProducers
  static constexpr int kPipeBytes = kWideProducers * T::kPipeBytes;  // T: four warps
  static constexpr int kBufferBytes = 2 * S::kTileBytes;  // K, then V^T
  static constexpr int kBufOffset = (kPipeBytes + 127) / 128 * 128;
  static constexpr int kMetaOffset = kBufOffset + kBuffers * kBufferBytes;
  static constexpr int kQueryOffset = kMetaOffset + kBuffers * S::kMetaBytes;  // the fp16 query tile
  static constexpr int kLutOffset = kQueryOffset + S::kTileBytes;
  static constexpr int kBarOffset = kLutOffset + T::kLutBytes;
  static constexpr int kBytes = kBarOffset + kWideProducers * S::kBarBytes;
  static constexpr int kLaunchBytes = kBytes + S::kAlignSlack;
  // Named barriers: full[b], empty[b], then the consumers' merge.
  static constexpr int kFullBarrier = 1;
  static constexpr int kEmptyBarrier = kFullBarrier + kBuffers;
  static constexpr int kMergeBarrier = kEmptyBarrier + kBuffers;
  static constexpr int kPairThreads = 2 * 32 * kWideWarps;  // a producer and a consumer
  // A consumer lane's state (WideRowState: O, then m0, m1, l0, l1, z0, z1),
  // float i of lane l of warp w at (w kStateFloats + i) 32 + l.
  static constexpr int kStateFloats = D / 8 * 4 + 6;
  static constexpr int kStateBytes = kWideWarps * kStateFloats * 32 * 4;
  static constexpr int kORowsOffset = kBufOffset + (kStateBytes + 127) / 128 * 128;
  static_assert(kMergeBarrier <= 15, "sixteen named barriers");
  static_assert(kWideColumns * D * 4 <= kBuffers * kBufferBytes, "the prepared query fits the buffers");
  static_assert(kORowsOffset + kWideColumns * S::kOPitch * 4 <= kMetaOffset, "the end's state and O rows fit");
  static_assert(kBarOffset % 8 == 0 && kMetaOffset % 16 == 0 && kQueryOffset % 128 == 0,
                "barriers, 16-byte metadata loads, the query tile's core matrices");
  static_assert(T::kStages == kWideProducerStages, "T: the producers' traits");
  static_assert(kLaunchBytes + 64 <= 227 * 1024, "one block an SM");
};

// Producer warp `warp` (in its warpgroup) of producer `producer`: its tiles,
// one in each of the steps producer, producer + kWideProducers, ...,
// dequantized into the step buffers.
template <class T, class Loader, class Buffers>
__device__ __forceinline__ void wide_produce(const DecodeParams& p, Loader& loader, std::uint8_t* stages,
                                             const WarpTiles& tiles, const FastRows& rows,
                                             const core::TokenRange& range, int steps, int kv_head,
                                             const std::uint8_t* lut, const Buffers& buffers, int producer, int warp,
                                             int lane) {
  using S = WideSmem<T>;
  using X = WideSpecializedSmem<T>;
  const int g = lane >> 2, c = lane & 3;
  const std::uint32_t lut_lane_off = static_cast<std::uint32_t>((lane % T::kLutCopies) * 4);
  std::uint8_t* issue_stage = issue_first_stages<T>(loader, stages, tiles.count);
  with_stage<T>(p, kv_head, g, c, [&](const auto& stage) {
    std::uint8_t* const last_stage = stages + (T::kStages - 1) * T::kStageBytes;
    const std::uint8_t* st = stages;
    for (int step = producer, i = 0; step < steps; step += kWideProducers, ++i) {  // i: the warp's tile
      const int buf = step % X::kBuffers;
      const int tok0 = range.begin + step * S::kStep + warp * T::kTile;
      const bool mine = i < tiles.count;
      if (mine) {
        loader.wait();
        __syncwarp();
        if (i + T::kStages - 1 < tiles.count) loader.issue(issue_stage);
        loader.commit();
        issue_stage = issue_stage == last_stage ? stages : issue_stage + T::kStageBytes;
      }
      if (step >= X::kBuffers) named_barrier_sync(X::kEmptyBarrier + buf, X::kPairThreads);
      if (mine) {
        wide_dequantize<T>(stage, st, lut, lut_lane_off, tok0, min(T::kTile, range.end - tok0), rows.attended.begin,
                           warp * T::kTile, buffers.k(buf), buffers.v(buf), buffers.meta(buf), g, c);
        st = st == last_stage ? stages : st + T::kStageBytes;
      } else {
        wide_clear<T>(warp * T::kTile, buffers.v(buf), buffers.meta(buf), lane);
      }
#if TURBOQUANT_HAVE_WGMMA
      fence_shared_for_async();  // wgmma reads the tiles through the async proxy
#endif
      named_barrier_arrive(X::kFullBarrier + buf, X::kPairThreads);
    }
  });
  loader.drain();
}

// Folds another state of the same columns (float i of this lane at other[32 i])
// into w: both rescaled to the larger max.
template <int D>
__device__ __forceinline__ void wide_merge_state(WideRowState<D>& w, const float* other) {
  constexpr int kAt = D / 8 * 4;  // m0, m1, l0, l1, z0, z1 after O
  const float m0 = other[32 * kAt], m1 = other[32 * (kAt + 1)];
  const float new0 = fmaxf(w.m0, m0), new1 = fmaxf(w.m1, m1);
  const float ref0 = core::softmax_reference(new0), ref1 = core::softmax_reference(new1);
  const float a0 = fast_exp2(w.m0 - ref0), a1 = fast_exp2(w.m1 - ref1);
  const float b0 = fast_exp2(m0 - ref0), b1 = fast_exp2(m1 - ref1);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    w.o[n][0] = w.o[n][0] * a0 + other[32 * (4 * n)] * b0;
    w.o[n][1] = w.o[n][1] * a0 + other[32 * (4 * n + 1)] * b0;
    w.o[n][2] = w.o[n][2] * a1 + other[32 * (4 * n + 2)] * b1;
    w.o[n][3] = w.o[n][3] * a1 + other[32 * (4 * n + 3)] * b1;
  }
  w.l0 = w.l0 * a0 + other[32 * (kAt + 2)] * b0;
  w.l1 = w.l1 * a1 + other[32 * (kAt + 3)] * b1;
  w.z0 = w.z0 * a0 + other[32 * (kAt + 4)] * b0;
  w.z1 = w.z1 * a1 + other[32 * (kAt + 5)] * b1;
  w.m0 = new0;
  w.m1 = new1;
}

template <int D>
__device__ __forceinline__ void wide_store_state(const WideRowState<D>& w, float* state) {
  constexpr int kAt = D / 8 * 4;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) state[32 * (4 * n + e)] = w.o[n][e];
  }
  const float tail[6] = {w.m0, w.m1, w.l0, w.l1, w.z0, w.z1};
#pragma unroll
  for (int i = 0; i < 6; ++i) state[32 * (kAt + i)] = tail[i];
}

// maps: the tensor maps of T::kTensorCopy's copies (a __grid_constant__, as
// the wide kernel's). Grid (splits, Hk, row blocks), as the wide kernel's.
template <class T>
__global__ void __launch_bounds__(32 * kWideSpecializedWarps, 1)
    wide_specialized_decode_kernel(const __grid_constant__ FastTensorMaps maps, DecodeParams p) {
  using S = WideSmem<T>;
  using X = WideSpecializedSmem<T>;
  constexpr int D = T::kDim;
  extern __shared__ __align__(16) std::uint8_t wide_smem[];
  std::uint8_t* const smem =
      T::kTensorCopy ? wide_smem + (T::kWorkAlign - smem_addr(wide_smem) % T::kWorkAlign) % T::kWorkAlign : wide_smem;
  struct Buffers {
    std::uint8_t* base;
    __device__ __half* k(int b) const { return reinterpret_cast<__half*>(base + X::kBufOffset + b * X::kBufferBytes); }
    __device__ __half* v(int b) const { return k(b) + S::kTileBytes / 2; }
    __device__ float* meta(int b) const { return reinterpret_cast<float*>(base + X::kMetaOffset + b * S::kMetaBytes); }
  };
  const Buffers buffers{smem};
  std::uint8_t* const lut = smem + X::kLutOffset;
  __shared__ std::uint32_t centroid_half[16];

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int role = warp / kWideWarps;        // producers, then consumers
  const bool producer = role < kWideProducers;
  const int pair = role % kWideProducers;    // the steps of the role: pair, pair + kWideProducers, ...
  const int group_warp = warp % kWideWarps;  // the warp in its warpgroup
  const int g = lane >> 2, c = lane & 3;
  WideWork work;
  if (!wide_work<T>(p, split, kv_head, work)) return;
  const FastRows& rows = work.rows;
  const core::TokenRange& range = work.range;
  const FastColumns& cols = work.cols;
  const int steps = work.steps;

  if constexpr (!T::kFp8) build_pair_table<T, 32 * kWideSpecializedWarps>(p, lut, centroid_half, tid);
  // The block's columns, prepared in the buffers (ends with a barrier).
  float* const prep = reinterpret_cast<float*>(smem + X::kBufOffset);
  prepare_query_rows<D, kWideColumns, kWideSpecializedWarps>(p, cols.count, [&](int k) { return cols.row(k); }, prep,
                                                             nullptr);
  const int k0 = 16 * group_warp + g, k1 = k0 + 8;  // a consumer lane's two columns
#if TURBOQUANT_HAVE_WGMMA
  // The query tile: (column m, K column k) = prep[m][the dim of k] as fp16.
  __half* const q_tile = reinterpret_cast<__half*>(smem + X::kQueryOffset);
  for (int i = tid; i < kWideColumns * D; i += 32 * kWideSpecializedWarps) {
    const int m = i / D, k = i % D;
    const int r = k % 16;  // k = wide_key_column(c, ks, p) + e
    const int dim = T::key_dim((r % 8) / 2, 4 * (k / 16) + 2 * (r / 8) + r % 2);
    q_tile[S::k_offset(m, k)] = __float2half_rn(m < cols.count ? prep[m * D + dim] : 0.0f);
  }
  fence_shared_for_async();  // wgmma reads it through the async proxy
  const __half* const qa = q_tile;
#else
  std::uint32_t qa[T::kKSteps][4];
  if (!producer) wide_query_fragments<T>(prep, cols, k0, k1, c, qa);
#endif
  __syncthreads();  // the consumers have their query before the producers write the buffers

  WideRowState<D> w;
  if (producer) {
    warpgroup_lower_registers<kWideProducerRegisters>();
    // Tile 4 s + w of the split is step s's tile of warp w.
    const WarpTiles tiles = warp_tiles(range, T::kTile, warp, kWideProducers * kWideWarps);
    std::uint8_t* const stages = smem + warp * T::kStages * T::kStageBytes;
    const std::int32_t* block_row = p.block_table + std::int64_t{rows.b} * p.max_blocks_per_seq;
    if constexpr (T::kTensorCopy) {
      auto* bars = reinterpret_cast<std::uint64_t*>(smem + X::kBarOffset) + warp * T::kStages;
      FastTensorLoader<T> loader(p, &maps, block_row, tiles, kv_head, lane, bars);
      wide_produce<T>(p, loader, stages, tiles, rows, range, steps, kv_head, lut, buffers, pair, group_warp, lane);
    } else {
      FastTileLoader<T> loader(p, block_row, tiles, kv_head, lane);
      wide_produce<T>(p, loader, stages, tiles, rows, range, steps, kv_head, lut, buffers, pair, group_warp, lane);
    }
  } else {
    warpgroup_raise_registers<kWideConsumerRegisters>();
    const WideMask mask = wide_mask<T>(p, rows, cols, k0, k1);
    wide_clear_state(w);
    int held = 0;               // the buffer of this consumer's previous step
    bool release_held = false;  // whether the producer waits for it (it has a step kBuffers later)
    for (int step = pair; step < steps; step += X::kConsumers) {
      const int buf = step % X::kBuffers;
      named_barrier_sync(X::kFullBarrier + buf, X::kPairThreads);
      wide_step<T>(w, qa, buffers.k(buf), buffers.v(buf), buffers.meta(buf), range.begin + step * S::kStep,
                   range.end, mask, lane, [&] {
                     if (release_held) named_barrier_arrive(X::kEmptyBarrier + held, X::kPairThreads);
                   });
      held = buf;
      release_held = step + X::kBuffers < steps;
    }
#if TURBOQUANT_HAVE_WGMMA
    wgmma_wait_all();  // the last O product
    wgmma_pin(w.o);
#endif
  }
  pdl_launch_dependents();
  __syncthreads();  // every warp is past its loop: the buffers are free
  if (producer) return;
  float* const state = reinterpret_cast<float*>(smem + X::kBufOffset) + group_warp * X::kStateFloats * 32 + lane;
  if (pair == 1) wide_store_state(w, state);
  named_barrier_sync(X::kMergeBarrier, 2 * 32 * kWideWarps);
  if (pair == 1) return;
  wide_merge_state(w, state);
  wide_write_partials<T>(p, w, reinterpret_cast<float*>(smem + X::kORowsOffset), cols, split, group_warp, lane);
}

}  // namespace turboquant::cuda::detail
