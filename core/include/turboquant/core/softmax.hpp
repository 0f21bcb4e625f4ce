// Online softmax in base 2 (docs/ARITHMETIC.md §softmax, §merge). Scores are
// base-2 logits (the softmax scale times log2(e) is folded into the query), so
// every exponential is the contract's exp2_tq.
//
// Per split and query head: state (max, sum) plus an unnormalized accumulator
// acc[D]. Each tile of scores first rescales (sum, acc) by alpha, then adds its
// probabilities in token order. Splits are merged in split order.
#pragma once

#include "turboquant/core/exp2_log.hpp"

namespace turboquant::core {

struct SoftmaxState {
  float max = -kInf;  // running max of base-2 logits
  float sum = 0.0f;   // running sum of exp2(logit - max)
};

// The finishing steps of a tile, for backends that reduce the tile max their
// own way: the reference the exponentials are taken against (the new running
// max, or 0 when every score so far is -inf, which avoids -inf - -inf), and
// exp2(x - ref) for a score (its probability) or the old max (alpha).
TQ_HD float softmax_reference(float new_max) { return new_max == -kInf ? 0.0f : new_max; }
TQ_HD float softmax_exponent(float x, float ref) { return sub_rn(x, ref); }
TQ_HD float softmax_weight(float x, float ref) { return exp2_tq(softmax_exponent(x, ref)); }

// Folds the scores of one tile (n >= 1 tokens, in token order) into `state`:
// writes probs[t] = exp2(scores[t] - new_max) and returns alpha, the factor the
// caller must multiply its accumulator by before adding probs[t] * v[t].
TQ_HD float softmax_fold_tile(SoftmaxState& state, const float* scores, int n, float* probs) {
  float tile_max = scores[0];
  for (int t = 1; t < n; ++t) tile_max = max_f(tile_max, scores[t]);
  const float new_max = max_f(state.max, tile_max);
  const float ref = softmax_reference(new_max);
  const float alpha = softmax_weight(state.max, ref);
  float sum = mul_rn(state.sum, alpha);
  for (int t = 0; t < n; ++t) {
    probs[t] = softmax_weight(scores[t], ref);
    sum = add_rn(sum, probs[t]);
  }
  state.max = new_max;
  state.sum = sum;
  return alpha;
}

// acc[d] <- acc[d] * alpha, then acc[d] <- fma(p, v[d], acc[d]) per token.
TQ_HD float rescale(float acc, float alpha) { return mul_rn(acc, alpha); }
TQ_HD float accumulate(float acc, float prob, float value) { return fma_rn(prob, value, acc); }

// Merge of per-split partials, in split order: M = max of split maxima; each
// split weighs w = exp2(m_s - M); sum = sum of fma(w, sum_s); acc likewise.
TQ_HD float merge_max(float merged_max, float split_max) { return max_f(merged_max, split_max); }
TQ_HD float merge_exponent(float split_max, float merged_max) { return sub_rn(split_max, merged_max); }
TQ_HD float merge_weight(float split_max, float merged_max) { return exp2_tq(merge_exponent(split_max, merged_max)); }
TQ_HD float merge_add(float total, float weight, float part) { return fma_rn(weight, part, total); }

// Attention sinks (docs/ARITHMETIC.md §7): the sink logit in the base-2 units
// of the scores, fl(sink * log2(e)). It enters the merge once, as a partial
// placed before split 0 with max = sink_logit, sum = 1 and acc = 0: the merged
// max starts at it, the merged sum at merge_weight(sink_logit, merged_max).
TQ_HD float sink_logit(float sink) { return mul_rn(sink, kLog2e); }

// Final output element and natural-log LSE. With no tokens (merged max -inf)
// the output is 0 and the LSE -inf (vLLM divides 0 by 0 there).
TQ_HD float finalize_output(float acc, float sum, float merged_max) {
  return merged_max == -kInf ? 0.0f : div_rn(acc, sum);
}
// lse_of_log2 is the last step for a caller that has log2_tq(sum) already
// (merged_max finite).
TQ_HD float lse_of_log2(float merged_max, float log2_sum) { return mul_rn(add_rn(merged_max, log2_sum), kLn2); }
TQ_HD float finalize_lse(float sum, float merged_max) {
  return merged_max == -kInf ? -kInf : lse_of_log2(merged_max, log2_tq(sum));
}

}  // namespace turboquant::core
