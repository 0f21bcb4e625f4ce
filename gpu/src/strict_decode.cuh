// Strict decode: bit-exact with decode_reference (cpu/reference/decode_ref.cpp).
// One block per (split, KV head x query-head chunk, sequence), vLLM's split plan
// (core::split_range), tiles of kTileTokens tokens from the split start. Every
// arithmetic step is a core/ call on fp32 CUDA cores:
//   keys, values   the tile's records are copied to shared memory, then
//                  element-wise core::unpack_code / centroid / fp8 / dequant_value
//   scores         one thread per (query head, token) calls core::dot16 and
//                  core::key_score
//   softmax        one thread per query head calls core::softmax_fold_tile
//   accumulation   core::rescale, then core::accumulate per token in order
// The per-split partial (max, sum, acc) goes to the workspace; merge_kernel
// combines the splits.
#pragma once

#include "params.hpp"
#include "query_prep.cuh"
#include "turboquant/core/reduction.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kStrictThreads = 128;

template <int D, int KB, int VB>
struct StrictShared {
  static constexpr int kRow = D + 4;  // padded row: consecutive tokens start in different banks
  static constexpr int kKeyBytes = KB == 8 ? D : D * KB / 8;
  static constexpr int kRecordBytes = kKeyBytes + D * VB / 8;  // = format.data_bytes()
  static constexpr int kRawRow = (kRecordBytes + 15) / 16 * 16;
  float q[kStrictHeadsPerBlock][D];
  float key[core::kTileTokens][kRow];  // key directions; also scratch for a dense query rotation
  float value[core::kTileTokens][kRow];
  std::uint8_t raw[core::kTileTokens][kRawRow];  // the tile's records (key bytes | value bytes)
  const std::uint8_t* record[core::kTileTokens];
  float norm[core::kTileTokens];
  float vscale[core::kTileTokens];
  float vzero[core::kTileTokens];
  float scores[kStrictHeadsPerBlock][core::kTileTokens];
  float probs[kStrictHeadsPerBlock][core::kTileTokens];
  float alpha[kStrictHeadsPerBlock];
  core::Codebook codebook;
};

// Dynamic shared memory: sizeof(StrictShared<D, KB, VB>) (over 48 KB for D = 256).
template <int D, int KB, int VB>
__global__ void __launch_bounds__(kStrictThreads) strict_decode_kernel(DecodeParams p) {
  using Shared = StrictShared<D, KB, VB>;
  extern __shared__ __align__(16) std::uint8_t strict_smem[];
  Shared& sm = *reinterpret_cast<Shared*>(strict_smem);
  constexpr int kT = core::kTileTokens;
  constexpr int kQuads = D / 4;                                              // float4 groups per head
  constexpr int kQuadsPerThread = (kStrictHeadsPerBlock * kQuads + kStrictThreads - 1) / kStrictThreads;
  constexpr int kHalves = Shared::kRecordBytes / 2;  // records are copied in 2-byte units (always aligned)

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const int seq_len = p.seq_lens[b];
  const core::TokenRange range = core::split_range(seq_len, p.plan_splits, split);
  if (range.empty()) return;  // the merge skips empty splits
  const int first_head = chunk * p.heads_per_block;
  const int heads = min(p.heads_per_block, p.group - first_head);  // query heads of this block
  const int first_q = kv_head * p.group + first_head;              // query head index of row 0
  const std::int64_t first_row = std::int64_t{b} * p.num_q_heads + first_q;
  const std::int32_t* block_row = p.block_table + std::int64_t{b} * p.max_blocks_per_seq;

  if (tid == 0) sm.codebook = p.codebook;
  prepare_queries<D>(p, first_row, heads, &sm.q[0][0], &sm.key[0][0]);  // ends with a barrier

  core::SoftmaxState state;  // thread g < heads owns head g's state
  float acc[kQuadsPerThread][4];
#pragma unroll
  for (int k = 0; k < kQuadsPerThread; ++k) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[k][j] = 0.0f;
  }

  for (int tile = range.begin; tile < range.end; tile += kT) {
    const int n = min(kT, range.end - tile);
    __syncthreads();  // the previous tile's readers are done
    if (tid < n) {
      const int token = tile + tid;
      const std::uint8_t* block = p.cache + l.block_base(block_row[token / l.block_size]);
      const int slot = token % l.block_size;
      sm.record[tid] = block + l.key_data_offset(slot, kv_head);
      sm.norm[tid] = core::decode_key_norm(l, block, slot, kv_head);
      sm.vscale[tid] = core::read_meta(l, block, slot, kv_head, core::MetaField::kValueScale);
      sm.vzero[tid] = core::read_meta(l, block, slot, kv_head, core::MetaField::kValueZero);
    }
    __syncthreads();
    for (int u = tid; u < n * kHalves; u += kStrictThreads) {
      const int t = u / kHalves;
      const int k = u % kHalves;
      reinterpret_cast<std::uint16_t*>(sm.raw[t])[k] = reinterpret_cast<const std::uint16_t*>(sm.record[t])[k];
    }
    __syncthreads();
    // core::decode_key_direction and core::decode_value, one element per thread.
    for (int e = tid; e < n * D; e += kStrictThreads) {
      const int t = e / D;
      const int d = e % D;
      sm.key[t][d] = KB == 8 ? core::fp8_e4m3_to_float(sm.raw[t][d])
                             : sm.codebook.centroids[core::unpack_code(KB, sm.raw[t], d)];
      sm.value[t][d] =
          core::dequant_value(core::unpack_code(VB, sm.raw[t] + Shared::kKeyBytes, d), sm.vscale[t], sm.vzero[t]);
    }
    __syncthreads();
    {
      const int g = tid / kT;
      const int t = tid % kT;
      if (g < heads && t < n) sm.scores[g][t] = core::key_score(f, core::dot16(sm.q[g], sm.key[t], D), sm.norm[t]);
    }
    __syncthreads();
    if (tid < heads) sm.alpha[tid] = core::softmax_fold_tile(state, sm.scores[tid], n, sm.probs[tid]);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kQuadsPerThread; ++k) {
      const int qi = tid + k * kStrictThreads;
      const int g = qi / kQuads;
      if (g < heads) {
        const int d0 = (qi % kQuads) * 4;
        const float alpha = sm.alpha[g];
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[k][j] = core::rescale(acc[k][j], alpha);
        for (int t = 0; t < n; ++t) {
          const float prob = sm.probs[g][t];
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[k][j] = core::accumulate(acc[k][j], prob, sm.value[t][d0 + j]);
        }
      }
    }
  }

  const std::int64_t first_partial = first_row * p.num_splits + split;  // (row, split) of head 0
#pragma unroll
  for (int k = 0; k < kQuadsPerThread; ++k) {
    const int qi = tid + k * kStrictThreads;
    const int g = qi / kQuads;
    if (g < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{g} * p.num_splits) * D + (qi % kQuads) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) dst[j] = acc[k][j];
    }
  }
  if (tid < heads) {
    float* ml = p.partial_ml + (first_partial + std::int64_t{tid} * p.num_splits) * 2;
    ml[0] = state.max;
    ml[1] = state.sum;
  }
}

}  // namespace turboquant::cuda::detail
