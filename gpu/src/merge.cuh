// Merge of the per-split partials (docs/ARITHMETIC.md §merge), shared by both
// decode modes: for one (sequence, query head), splits in split order, empty
// splits skipped, exactly as decode_reference does it.
#pragma once

#include "elements.cuh"
#include "fast_plan.hpp"
#include "params.hpp"
#include "turboquant/core/softmax.hpp"

namespace turboquant::cuda::detail {

// Grid (num_q_heads, batch); any block size; dynamic shared memory num_splits floats.
__global__ void merge_kernel(DecodeParams p, bool tile_aligned) {
  extern __shared__ float weights[];
  const int hq = blockIdx.x;
  const int b = blockIdx.y;
  const int dims = p.layout.format.head_dim;
  const int seq_len = p.seq_lens[b];
  const std::int64_t row = std::int64_t{b} * p.num_q_heads + hq;
  const float* ml = p.partial_ml + row * p.num_splits * 2;
  const float* acc_in = p.partial_acc + row * p.num_splits * dims;

  float merged_max = -core::kInf;
  for (int s = 0; s < p.num_splits; ++s) {
    if (plan_range(tile_aligned, seq_len, p.num_splits, s).empty()) continue;
    merged_max = core::merge_max(merged_max, ml[2 * s]);
  }
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x) {
    weights[s] = plan_range(tile_aligned, seq_len, p.num_splits, s).empty() ? 0.0f
                                                                          : core::merge_weight(ml[2 * s], merged_max);
  }
  __syncthreads();
  float sum = 0.0f;
  for (int s = 0; s < p.num_splits; ++s) {
    if (plan_range(tile_aligned, seq_len, p.num_splits, s).empty()) continue;
    sum = core::merge_add(sum, weights[s], ml[2 * s + 1]);
  }
  for (int d = threadIdx.x; d < dims; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      if (plan_range(tile_aligned, seq_len, p.num_splits, s).empty()) continue;
      acc = core::merge_add(acc, weights[s], acc_in[std::int64_t{s} * dims + d]);
    }
    store_element(p.out, p.out_dtype, row * dims + d, core::finalize_output(acc, sum, merged_max));
  }
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[row] = core::finalize_lse(sum, merged_max);
}

}  // namespace turboquant::cuda::detail
