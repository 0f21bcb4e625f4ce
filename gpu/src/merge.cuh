// Merge of the per-split partials (docs/ARITHMETIC.md §merge), shared by both
// decode modes: for one (sequence, query head), splits in split order, empty
// splits skipped, exactly as decode_reference does it (strict); fast mode
// reduces the max and the weight sum as block-wide trees instead. The non-empty splits of
// either plan are a prefix 0..n-1. Thread d only ever needs column d of the
// partial accumulators, so each chunk of kMergeChunk splits is loaded into
// registers with independent (coalesced across the block) loads first, and
// the in-order fma chain then runs on registers.
#pragma once

#include "fast_plan.hpp"
#include "params.hpp"
#include "query_rows.cuh"
#include "turboquant/core/elements.hpp"
#include "turboquant/core/softmax.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kMergeChunk = 32;  // splits staged at a time

inline int merge_smem_bytes(int plan_splits, int head_dim) {
  (void)head_dim;  // per-split max and sum only; the accumulators stay in registers
  return static_cast<int>(2 * plan_splits * sizeof(float));
}

// v reduced over the whole block (max or sum), returned to every thread.
// `scratch` holds one float per warp; every thread must call it.
template <bool kMax>
__device__ float block_all_reduce(float v, float* scratch) {
#pragma unroll
  for (int x = 16; x >= 1; x >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, x);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) v = kMax ? fmaxf(v, scratch[w]) : v + scratch[w];
  __syncthreads();  // scratch may be reused
  return v;
}

// Grid (num_q_heads, rows); blockDim.x == head_dim; dynamic shared memory
// merge_smem_bytes(plan_splits, head_dim). A sink enters as in the golden
// model: a partial before split 0 with max = its logit, sum = 1, acc = 0; the
// LSE is then its own merge of the splits without it. Fast mode's splits of a
// row are those of its block's rows (FastRows::split_range).
__global__ void merge_kernel(DecodeParams p, bool tile_aligned) {
  extern __shared__ float merge_smem[];
  __shared__ float merged[4];  // max, sum; with a sink: the LSE's max and sum
  __shared__ float reduce[8];  // one value per warp (head_dim <= 256)
  pdl_wait_for_prerequisites();  // launched programmatically after the decode grid
  const int hq = blockIdx.x;
  const int b = blockIdx.y;
  const int dims = p.layout.format.head_dim;
  const int d = threadIdx.x;
  const int splits = p.plan_splits;
  const int n = tile_aligned ? fast_rows_of_row(p, b).nonempty_splits(splits)
                             : plan_nonempty(false, query_row(p, b).attended.size(), splits);
  const bool has_sink = p.sinks != nullptr;
  const float sink = has_sink ? core::sink_logit(p.sinks[hq]) : 0.0f;
  const std::int64_t row = std::int64_t{b} * p.num_q_heads + hq;
  // The row's partials; split s's at offset(0, s) from there.
  const core::PartialLayout pl = p.partials(dims);
  const float* ml = p.partial_ml + pl.ml_offset(row, 0);
  const float* acc_in = p.partial_acc + pl.acc_offset(row, 0);
  float* weight = merge_smem;              // [splits]: split max, then its weight
  float* sum_s = merge_smem + splits;      // [splits]
  for (int s = d; s < n; s += blockDim.x) {
    weight[s] = ml[pl.ml_offset(0, s)];
    sum_s[s] = ml[pl.ml_offset(0, s) + 1];
  }
  // Column d of a chunk of splits, loaded with independent loads; the first
  // chunk is in flight while the weights are computed.
  float part[kMergeChunk];
  auto load_part = [&](int s0) {
    const int count = min(kMergeChunk, n - s0);
#pragma unroll
    for (int s = 0; s < kMergeChunk; ++s) part[s] = s < count ? acc_in[pl.acc_offset(0, s0 + s) + d] : 0.0f;
  };
  load_part(0);
  __syncthreads();
  float merged_max;
  float sum;
  float lse_max = 0.0f, lse_sum = 0.0f;  // with a sink: the merge of the splits alone
  if (tile_aligned) {
    // Fast mode (not bit-exact): the max and the weighted sum as block-wide
    // tree reductions instead of one thread's chains over the splits.
    float m = -core::kInf;
    for (int s = d; s < n; s += blockDim.x) m = fmaxf(m, weight[s]);
    merged_max = block_all_reduce<true>(m, reduce);
    if (has_sink) {
      if (p.lse != nullptr) {
        float part = 0.0f;
        for (int s = d; s < n; s += blockDim.x) part += core::merge_weight(weight[s], merged_max) * sum_s[s];
        lse_sum = block_all_reduce<false>(part, reduce);
        lse_max = merged_max;
      }
      merged_max = fmaxf(merged_max, sink);
    }
    float part = 0.0f;
    for (int s = d; s < n; s += blockDim.x) {
      weight[s] = core::merge_weight(weight[s], merged_max);
      part = core::merge_add(part, weight[s], sum_s[s]);
    }
    sum = block_all_reduce<false>(part, reduce);  // its barriers also publish weight[]
    if (has_sink) sum += core::merge_weight(sink, merged_max);
  } else {
    // Strict: decode_reference's order, split by split.
    if (d == 0) {
      float m = -core::kInf;
      for (int s = 0; s < n; ++s) m = core::merge_max(m, weight[s]);
      if (has_sink) {  // the LSE leaves the sink out: the no-sink merge of (max, sum)
        float splits_sum = 0.0f;
        for (int s = 0; s < n; ++s) splits_sum = core::merge_add(splits_sum, core::merge_weight(weight[s], m), sum_s[s]);
        merged[2] = m;
        merged[3] = splits_sum;
        float with_sink = sink;
        for (int s = 0; s < n; ++s) with_sink = core::merge_max(with_sink, weight[s]);
        m = with_sink;
      }
      merged[0] = m;
    }
    __syncthreads();
    merged_max = merged[0];
    for (int s = d; s < n; s += blockDim.x) weight[s] = core::merge_weight(weight[s], merged_max);
    __syncthreads();
    if (d == 0) {
      float total = has_sink ? core::merge_weight(sink, merged_max) : 0.0f;
      for (int s = 0; s < n; ++s) total = core::merge_add(total, weight[s], sum_s[s]);
      merged[1] = total;
    }
    __syncthreads();
    sum = merged[1];
    if (has_sink) {
      lse_max = merged[2];
      lse_sum = merged[3];
    }
  }
  float acc = 0.0f;
  for (int s0 = 0; s0 < n; s0 += kMergeChunk) {
    if (s0 > 0) load_part(s0);
    const int count = min(kMergeChunk, n - s0);
#pragma unroll
    for (int s = 0; s < kMergeChunk; ++s) {
      if (s < count) acc = core::merge_add(acc, weight[s0 + s], part[s]);
    }
  }
  core::store_element(p.out, p.out_dtype, row * dims + d, core::finalize_output(acc, sum, merged_max));
  if (d == 0 && p.lse != nullptr) {
    p.lse[row] = has_sink ? core::finalize_lse(lse_sum, lse_max) : core::finalize_lse(sum, merged_max);
  }
}

}  // namespace turboquant::cuda::detail
