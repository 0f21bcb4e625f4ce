// The golden decode: scalar, single-threaded, written to be read. Every other
// backend must reproduce its bits (docs/ARITHMETIC.md), so each step below is
// one contract step from core/.
#include <cstring>
#include <vector>

#include "turboquant/core/reduction.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/query.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {
namespace {

using core::kTileTokens;

// The partial result of one split for one query head.
struct Partial {
  core::SoftmaxState state;
  std::vector<float> acc;  // unnormalized, [head_dim]
};

// One work item: (sequence, KV head, split) for all `group` query heads.
void decode_split(const ConstCacheView& cache, const std::int32_t* block_row, int kv_head, core::TokenRange range,
                  const Codebook& cb, const std::vector<float>& queries, int group, std::vector<Partial>& parts) {
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  float key[core::kMaxHeadDim];
  float value[core::kMaxHeadDim];
  std::vector<float> scores(static_cast<std::size_t>(group) * kTileTokens);
  std::vector<float> probs(scores.size());
  for (Partial& p : parts) {
    p.state = core::SoftmaxState{};
    p.acc.assign(dims, 0.0f);
  }
  for (int tile = range.begin; tile < range.end; tile += kTileTokens) {
    const int n = range.end - tile < kTileTokens ? range.end - tile : kTileTokens;
    for (int i = 0; i < n; ++i) {
      const int token = tile + i;
      const std::uint8_t* block = cache.data + l.block_base(block_row[token / l.block_size]);
      core::score_token(l, block, token % l.block_size, kv_head, cb, queries.data(), group, key, &scores[i], kTileTokens);
    }
    for (int g = 0; g < group; ++g) {
      const float alpha = core::softmax_fold_tile(parts[g].state, &scores[g * kTileTokens], n, &probs[g * kTileTokens]);
      for (float& acc : parts[g].acc) acc = core::rescale(acc, alpha);
    }
    for (int i = 0; i < n; ++i) {
      const int token = tile + i;
      const std::uint8_t* block = cache.data + l.block_base(block_row[token / l.block_size]);
      core::decode_value(l, block, token % l.block_size, kv_head, value);
      for (int g = 0; g < group; ++g) {
        const float p = probs[g * kTileTokens + i];
        for (int d = 0; d < dims; ++d) parts[g].acc[d] = core::accumulate(parts[g].acc[d], p, value[d]);
      }
    }
  }
}

}  // namespace

Status decode_reference(const ConstCacheView& cache, const DecodeArgs& a) {
  if (Status s = validate_decode(cache, a); !s.ok()) return s;
  if (a.batch == 0) return Status();  // nothing to do, and no workspace to size
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  const int group = a.num_q_heads / l.num_kv_heads;
  detail::Tables tables;
  (void)detail::resolve_tables(l.format, a.codebook, a.rotation, &tables);  // validated above
  const Codebook* cb = tables.codebook;
  const core::Rotation rot = tables.rotation;
  const auto* seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  const auto* table = static_cast<const std::int32_t*>(a.block_table.data);
  float* lse = static_cast<float*>(a.lse.data);

  std::vector<float> queries(static_cast<std::size_t>(group) * dims);
  // partials[s][g]; a split with no tokens keeps max = -inf and weighs 0.
  std::vector<std::vector<Partial>> partials(a.num_splits, std::vector<Partial>(group));
  for (int b = 0; b < a.batch; ++b) {
    const int seq_len = seq_lens[b];
    const std::int32_t* block_row = table + std::int64_t{b} * a.max_blocks_per_seq;
    for (int h = 0; h < l.num_kv_heads; ++h) {
      const std::int64_t first_row = std::int64_t{b} * a.num_q_heads + std::int64_t{h} * group;
      for (int g = 0; g < group; ++g) {
        detail::prepare_query_row(a, l.format, rot, first_row + g, &queries[std::size_t(g) * dims]);
      }
      for (int s = 0; s < a.num_splits; ++s) {
        const core::TokenRange range = core::split_range(seq_len, a.num_splits, s);
        for (Partial& p : partials[s]) p = Partial{core::SoftmaxState{}, std::vector<float>(dims, 0.0f)};
        if (!range.empty()) decode_split(cache, block_row, h, range, *cb, queries, group, partials[s]);
      }
      for (int g = 0; g < group; ++g) {
        float merged_max = -core::kInf;
        for (int s = 0; s < a.num_splits; ++s) merged_max = core::merge_max(merged_max, partials[s][g].state.max);
        float sum = 0.0f;
        std::vector<float> acc(dims, 0.0f);
        for (int s = 0; s < a.num_splits; ++s) {
          const core::TokenRange range = core::split_range(seq_len, a.num_splits, s);
          if (range.empty()) continue;
          const float w = core::merge_weight(partials[s][g].state.max, merged_max);
          sum = core::merge_add(sum, w, partials[s][g].state.sum);
          for (int d = 0; d < dims; ++d) acc[d] = core::merge_add(acc[d], w, partials[s][g].acc[d]);
        }
        const std::int64_t row = first_row + g;
        for (int d = 0; d < dims; ++d) {
          detail::store_element(a.out.data, a.out_dtype, row * dims + d, core::finalize_output(acc[d], sum, merged_max));
        }
        if (lse != nullptr) lse[row] = core::finalize_lse(sum, merged_max);
      }
    }
  }
  return Status();
}

}  // namespace turboquant
