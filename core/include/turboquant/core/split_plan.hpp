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

// The tokens a query row at position `position` (0-based) attends to: its
// causal prefix [0, position], cut to the last `window` positions when
// window > 0 (docs/ARITHMETIC.md §7). A single-token row of a sequence of
// seq_len tokens sits at position seq_len - 1 (seq_len 0: the empty range).
TQ_HD constexpr TokenRange attended_range(int position, int window) {
  const int end = position + 1;
  const int begin = window > 0 && end > window ? end - window : 0;
  return TokenRange{begin, end};
}

// Split s of a row's attended range: the plan of a sequence of
// attended.size() tokens (split_range), shifted to start at attended.begin.
// Without a window attended.begin is 0, so this is split_range(p + 1, ...):
// a multi-token row is planned exactly like the single-token row of a
// sequence of p + 1 tokens (vLLM's expanded rows with synthetic seq_lens).
TQ_HD constexpr TokenRange row_split_range(TokenRange attended, int splits, int split) {
  const TokenRange r = split_range(attended.size(), splits, split);
  return TokenRange{attended.begin + r.begin, attended.begin + r.end};
}

static_assert(split_len(37, 32) == 2);
static_assert(attended_range(36, 0).begin == 0 && attended_range(36, 0).end == 37);
static_assert(attended_range(36, 8).begin == 29 && attended_range(36, 8).end == 37);
static_assert(attended_range(3, 8).begin == 0 && attended_range(-1, 0).empty());
static_assert(row_split_range(TokenRange{29, 37}, 4, 1).begin == 31 &&
              row_split_range(TokenRange{29, 37}, 4, 1).end == 33);
static_assert(split_range(37, 32, 18).begin == 36 && split_range(37, 32, 18).end == 37);
static_assert(split_range(37, 32, 19).empty());
static_assert(split_range(0, 32, 0).empty());

}  // namespace turboquant::core
