// The golden decode: scalar, single-threaded, written to be read. Every other
// backend must reproduce its bits (docs/ARITHMETIC.md), so each step below is
// one contract step from core/ (a split of one KV head: core::decode_split).
#include <cstring>
#include <vector>

#include "turboquant/core/decode_split.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/query.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {
namespace {

// The partial results of one split for the `group` query heads of a KV head.
struct SplitPartials {
  std::vector<core::SoftmaxState> states;  // [group]
  std::vector<float> acc;                  // [group][head_dim], unnormalized
};

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
  std::vector<float> scratch(static_cast<std::size_t>(core::decode_split_scratch_floats(group, dims)));
  // partials[s]; a split with no tokens keeps max = -inf and weighs 0.
  std::vector<SplitPartials> partials(a.num_splits);
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
        SplitPartials& part = partials[s];
        part.states.assign(group, core::SoftmaxState{});
        part.acc.assign(static_cast<std::size_t>(group) * dims, 0.0f);
        if (!range.empty()) {
          core::decode_split(l, cache.data, block_row, h, range, *cb, queries.data(), group, part.states.data(),
                             part.acc.data(), dims, scratch.data());
        }
      }
      for (int g = 0; g < group; ++g) {
        float merged_max = -core::kInf;
        for (int s = 0; s < a.num_splits; ++s) merged_max = core::merge_max(merged_max, partials[s].states[g].max);
        float sum = 0.0f;
        std::vector<float> acc(dims, 0.0f);
        for (int s = 0; s < a.num_splits; ++s) {
          const core::TokenRange range = core::split_range(seq_len, a.num_splits, s);
          if (range.empty()) continue;
          const float w = core::merge_weight(partials[s].states[g].max, merged_max);
          sum = core::merge_add(sum, w, partials[s].states[g].sum);
          const float* part = &partials[s].acc[static_cast<std::size_t>(g) * dims];
          for (int d = 0; d < dims; ++d) acc[d] = core::merge_add(acc[d], w, part[d]);
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
