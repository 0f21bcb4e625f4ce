// Which tokens each work item covers (vLLM semantics, facts §h): a sequence of
// seq_len tokens is cut into `splits` ranges of split_len = ceil(seq_len /
// splits) tokens; split s covers [s*split_len, min((s+1)*split_len, seq_len)).
// Trailing splits may be empty and are skipped. Within a split, tokens are
// consumed in tiles of kTileTokens from the split's first token.
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

inline constexpr int kTileTokens = 16;
inline constexpr int kDefaultSplits = 32;
// Longest sequence a decode accepts (2^30 tokens): keeps every token index,
// tile start and tile end (< 2^30 + 16) far inside int32 arithmetic.
inline constexpr int kMaxSeqLen = 1 << 30;

struct TokenRange {
  int begin = 0;
  int end = 0;
  TQ_HD constexpr bool empty() const { return end <= begin; }
  TQ_HD constexpr int size() const { return end - begin; }
};

TQ_HD constexpr int split_len(int seq_len, int splits) {
  return static_cast<int>((std::int64_t{seq_len} + splits - 1) / splits);
}

TQ_HD constexpr TokenRange split_range(int seq_len, int splits, int split) {
  const std::int64_t len = split_len(seq_len, splits);
  const std::int64_t begin = len * split;
  if (begin >= seq_len) return TokenRange{seq_len, seq_len};
  const std::int64_t end = begin + len < seq_len ? begin + len : seq_len;
  return TokenRange{static_cast<int>(begin), static_cast<int>(end)};
}

static_assert(split_len(37, 32) == 2);
static_assert(split_range(37, 32, 18).begin == 36 && split_range(37, 32, 18).end == 37);
static_assert(split_range(37, 32, 19).empty());
static_assert(split_range(0, 32, 0).empty());

}  // namespace turboquant::core
