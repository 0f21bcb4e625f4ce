// Merge of the per-split partials (docs/ARITHMETIC.md §merge), shared by both
// decode modes: for one (sequence, query head), splits in split order, empty
// splits skipped, exactly as decode_reference does it. The non-empty splits of
// either plan are a prefix 0..n-1. Thread d only ever needs column d of the
// partial accumulators, so each chunk of kMergeChunk splits is loaded into
// registers with independent (coalesced across the block) loads first, and
// the in-order fma chain then runs on registers.
#pragma once

#include "elements.cuh"
#include "fast_plan.hpp"
#include "params.hpp"
#include "turboquant/core/softmax.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kMergeChunk = 32;  // splits staged at a time

inline int merge_smem_bytes(int plan_splits, int head_dim) {
  (void)head_dim;  // per-split max and sum only; the accumulators stay in registers
  return static_cast<int>(2 * plan_splits * sizeof(float));
}

// Grid (num_q_heads, batch); blockDim.x == head_dim; dynamic shared memory
// merge_smem_bytes(plan_splits, head_dim).
__global__ void merge_kernel(DecodeParams p, bool tile_aligned) {
  extern __shared__ float merge_smem[];
  __shared__ float merged[2];  // max, sum
  pdl_wait_for_prerequisites();  // launched programmatically after the decode grid
  const int hq = blockIdx.x;
  const int b = blockIdx.y;
  const int dims = p.layout.format.head_dim;
  const int d = threadIdx.x;
  const int seq_len = p.seq_lens[b];
  const int splits = p.plan_splits;
  const int n = plan_nonempty(tile_aligned, seq_len, splits);
  const std::int64_t row = std::int64_t{b} * p.num_q_heads + hq;
  const float* ml = p.partial_ml + row * p.num_splits * 2;
  const float* acc_in = p.partial_acc + row * p.num_splits * dims;
  float* weight = merge_smem;              // [splits]: split max, then its weight
  float* sum_s = merge_smem + splits;      // [splits]
  for (int s = d; s < n; s += blockDim.x) {
    weight[s] = ml[2 * s];
    sum_s[s] = ml[2 * s + 1];
  }
  __syncthreads();
  if (d == 0) {
    float m = -core::kInf;
    for (int s = 0; s < n; ++s) m = core::merge_max(m, weight[s]);
    merged[0] = m;
  }
  __syncthreads();
  const float merged_max = merged[0];
  for (int s = d; s < n; s += blockDim.x) weight[s] = core::merge_weight(weight[s], merged_max);
  __syncthreads();
  if (d == 0) {
    float sum = 0.0f;
    for (int s = 0; s < n; ++s) sum = core::merge_add(sum, weight[s], sum_s[s]);
    merged[1] = sum;
  }
  __syncthreads();
  float acc = 0.0f;
  for (int s0 = 0; s0 < n; s0 += kMergeChunk) {
    const int count = min(kMergeChunk, n - s0);
    float part[kMergeChunk];
#pragma unroll
    for (int s = 0; s < kMergeChunk; ++s) part[s] = s < count ? acc_in[std::int64_t{s0 + s} * dims + d] : 0.0f;
#pragma unroll
    for (int s = 0; s < kMergeChunk; ++s) {
      if (s < count) acc = core::merge_add(acc, weight[s0 + s], part[s]);
    }
  }
  const float sum = merged[1];
  store_element(p.out, p.out_dtype, row * dims + d, core::finalize_output(acc, sum, merged_max));
  if (d == 0 && p.lse != nullptr) p.lse[row] = core::finalize_lse(sum, merged_max);
}

}  // namespace turboquant::cuda::detail
