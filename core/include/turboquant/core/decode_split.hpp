// One decode work item in the contract's order (docs/ARITHMETIC.md §5,
// "Within a split"): the tokens of one split of one sequence and KV head, in
// tiles of 16, for all `group` query heads of that KV head. The golden decode
// (cpu/reference) and the CPU's scalar ISA both run exactly this; the SIMD and
// CUDA kernels evaluate the same steps lane by lane.
#pragma once

#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::core {

// Floats of scratch decode_split needs: scores and probabilities per (head,
// token of a tile), one key and one value.
TQ_HD constexpr int decode_split_scratch_floats(int group, int head_dim) {
  return 2 * group * kTileTokens + 2 * head_dim;
}

// block_row: the sequence's row of the block table; queries: `group` prepared
// rows (core/query.hpp) of head_dim floats. Writes states[g] and the
// unnormalized acc[g * acc_stride + d] of query head g (both initialized here).
TQ_HD void decode_split(const BlockLayout& l, const std::uint8_t* cache, const std::int32_t* block_row, int h,
                        TokenRange range, const Codebook& cb, const float* queries, int group, SoftmaxState* states,
                        float* acc, std::int64_t acc_stride, float* scratch) {
  const int dims = l.format.head_dim;
  float* scores = scratch;                      // [group][16]
  float* probs = scores + group * kTileTokens;  // [group][16]
  float* key = probs + group * kTileTokens;     // [head_dim]
  float* value = key + dims;                    // [head_dim]
  const auto block_of = [&](int token) { return cache + l.block_base(block_row[token / l.block_size]); };
  for (int g = 0; g < group; ++g) {
    states[g] = SoftmaxState{};
    for (int d = 0; d < dims; ++d) acc[g * acc_stride + d] = 0.0f;
  }
  for (int tile = range.begin; tile < range.end; tile += kTileTokens) {
    const int n = range.end - tile < kTileTokens ? range.end - tile : kTileTokens;
    for (int i = 0; i < n; ++i) {
      const int token = tile + i;
      score_token(l, block_of(token), token % l.block_size, h, cb, queries, group, key, scores + i, kTileTokens);
    }
    for (int g = 0; g < group; ++g) {
      const float alpha = softmax_fold_tile(states[g], scores + g * kTileTokens, n, probs + g * kTileTokens);
      for (int d = 0; d < dims; ++d) acc[g * acc_stride + d] = rescale(acc[g * acc_stride + d], alpha);
    }
    for (int i = 0; i < n; ++i) {
      const int token = tile + i;
      decode_value(l, block_of(token), token % l.block_size, h, value);
      for (int g = 0; g < group; ++g) {
        const float p = probs[g * kTileTokens + i];
        float* a = acc + g * acc_stride;
        for (int d = 0; d < dims; ++d) a[d] = accumulate(a[d], p, value[d]);
      }
    }
  }
}

}  // namespace turboquant::core
