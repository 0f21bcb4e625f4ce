// Strict decode: bit-exact with decode_reference (cpu/reference/decode_ref.cpp).
// One block per (split, KV head x query-head chunk, sequence), vLLM's split plan
// (core::split_range), tiles of kTileTokens tokens from the split start. Every
// arithmetic step is a core/ call on fp32 CUDA cores:
//   keys, values   element-wise core::unpack_code / centroid / fp8 / dequant_value
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

template <int D>
struct StrictShared {
  static constexpr int kRow = D + 4;  // padded row: consecutive tokens start in different banks
  float q[kStrictHeadsPerBlock][D];
  float key[core::kTileTokens][kRow];  // key directions; also scratch for a dense query rotation
  float value[core::kTileTokens][kRow];
  float norm[core::kTileTokens];
  float vscale[core::kTileTokens];
  float vzero[core::kTileTokens];
  std::int64_t block_base[core::kTileTokens];
  float scores[kStrictHeadsPerBlock][core::kTileTokens];
  float probs[kStrictHeadsPerBlock][core::kTileTokens];
  float alpha[kStrictHeadsPerBlock];
  core::Codebook codebook;
};

template <int D>
__global__ void __launch_bounds__(kStrictThreads) strict_decode_kernel(DecodeParams p) {
  static_assert(sizeof(StrictShared<D>) <= 48 * 1024, "static shared memory limit");
  __shared__ StrictShared<D> sm;
  constexpr int kT = core::kTileTokens;
  constexpr int kQuads = D / 4;                                              // float4 groups per head
  constexpr int kQuadsPerThread = (kStrictHeadsPerBlock * kQuads + kStrictThreads - 1) / kStrictThreads;

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const int seq_len = p.seq_lens[b];
  const core::TokenRange range = core::split_range(seq_len, p.num_splits, split);
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
      const std::int64_t base = l.block_base(block_row[token / l.block_size]);
      const int slot = token % l.block_size;
      const std::uint8_t* block = p.cache + base;
      sm.block_base[tid] = base;
      sm.norm[tid] = core::decode_key_norm(l, block, slot, kv_head);
      sm.vscale[tid] = core::read_meta(l, block, slot, kv_head, core::MetaField::kValueScale);
      sm.vzero[tid] = core::read_meta(l, block, slot, kv_head, core::MetaField::kValueZero);
    }
    __syncthreads();
    // core::decode_key_direction and core::decode_value, one element per thread.
    for (int e = tid; e < n * D; e += kStrictThreads) {
      const int t = e / D;
      const int d = e % D;
      const int slot = (tile + t) % l.block_size;
      const std::uint8_t* block = p.cache + sm.block_base[t];
      const std::uint8_t* kbytes = block + l.key_data_offset(slot, kv_head);
      sm.key[t][d] = f.fp8_keys() ? core::fp8_e4m3_to_float(kbytes[d])
                                  : sm.codebook.centroids[core::unpack_code(f.key_bits, kbytes, d)];
      const std::uint8_t* vbytes = block + l.value_data_offset(slot, kv_head);
      sm.value[t][d] = core::dequant_value(core::unpack_code(f.value_bits, vbytes, d), sm.vscale[t], sm.vzero[t]);
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
