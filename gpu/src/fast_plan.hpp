// The fast kernel's split plan: vLLM's split length rounded up to whole
// 16-token tiles, so that every tile starts at a multiple of 16 tokens and (with
// block_size % 16 == 0) lies inside one cache block. Fast mode is not bit-exact,
// so it is free to cut the work differently from the golden model.
#pragma once

#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

TQ_HD constexpr int fast_split_len(int seq_len, int splits) {
  const int len = core::split_len(seq_len, splits);
  return (len + core::kTileTokens - 1) / core::kTileTokens * core::kTileTokens;
}

TQ_HD constexpr core::TokenRange fast_split_range(int seq_len, int splits, int split) {
  const std::int64_t len = fast_split_len(seq_len, splits);
  const std::int64_t begin = len * split;
  if (begin >= seq_len) return core::TokenRange{seq_len, seq_len};
  const std::int64_t end = begin + len < seq_len ? begin + len : seq_len;
  return core::TokenRange{static_cast<int>(begin), static_cast<int>(end)};
}

// The plan a kernel (and the merge after it) uses.
TQ_HD constexpr core::TokenRange plan_range(bool tile_aligned, int seq_len, int splits, int split) {
  return tile_aligned ? fast_split_range(seq_len, splits, split) : core::split_range(seq_len, splits, split);
}

static_assert(fast_split_range(4096, 32, 1).begin == 128);
static_assert(fast_split_range(37, 32, 2).begin == 32 && fast_split_range(37, 32, 2).end == 37);
static_assert(fast_split_range(37, 32, 3).empty());
static_assert(fast_split_range(37, 32, 1).begin == 16 && fast_split_range(37, 32, 1).end == 32);

}  // namespace turboquant::cuda::detail
