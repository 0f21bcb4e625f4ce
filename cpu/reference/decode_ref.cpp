// The golden decode: scalar, single-threaded, written to be read. Every other
// backend must reproduce its bits (docs/ARITHMETIC.md), so each step below is
// one contract step from core/ (a split of one KV head: core::decode_split).
// Query rows are decoded one at a time, each over its own attended range
// (§7): a multi-token row is exactly the single-token row of a sequence of
// p + 1 tokens, so the cache is re-read per row; fast backends share tiles.
#include <algorithm>
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

// One query row of sequence b: its index in query / out / lse and the tokens it attends to.
struct QueryRow {
  std::int64_t row;
  int b;
  core::TokenRange attended;
};

class ReferenceDecoder {
 public:
  ReferenceDecoder(const ConstCacheView& cache, const DecodeArgs& a)
      : cache_(cache), a_(a), l_(cache.layout), dims_(l_.format.head_dim), group_(a.num_q_heads / l_.num_kv_heads) {
    detail::Tables tables;
    (void)detail::resolve_tables(l_.format, a.codebook, a.rotation, &tables);  // validated by the caller
    cb_ = tables.codebook;
    rot_ = tables.rotation;
    queries_.resize(static_cast<std::size_t>(group_) * dims_);
    scratch_.resize(static_cast<std::size_t>(core::decode_split_scratch_floats(group_, dims_)));
    partials_.resize(a.num_splits);
    acc_.resize(dims_);
  }

  void decode_row(const QueryRow& r) {
    const auto* table = static_cast<const std::int32_t*>(a_.block_table.data);
    const std::int32_t* block_row = table + std::int64_t{r.b} * a_.max_blocks_per_seq;
    for (int h = 0; h < l_.num_kv_heads; ++h) {
      const std::int64_t first = r.row * a_.num_q_heads + std::int64_t{h} * group_;
      for (int g = 0; g < group_; ++g) {
        detail::prepare_query_row(a_, l_.format, rot_, first + g, &queries_[std::size_t(g) * dims_]);
      }
      for (int s = 0; s < a_.num_splits; ++s) {
        const core::TokenRange range = core::row_split_range(r.attended, a_.num_splits, s);
        SplitPartials& part = partials_[s];
        part.states.assign(group_, core::SoftmaxState{});
        part.acc.assign(static_cast<std::size_t>(group_) * dims_, 0.0f);
        if (!range.empty()) {
          core::decode_split(l_, cache_.data, block_row, h, range, *cb_, queries_.data(), group_, part.states.data(),
                             part.acc.data(), dims_, scratch_.data());
        }
      }
      for (int g = 0; g < group_; ++g) merge(r, h * group_ + g, first + g);
    }
  }

 private:
  // §5 Merge, with the sink of §7 as a partial before split 0 (max = its
  // logit, sum = 1, acc = 0). The LSE leaves the sink out: its own merge of
  // the splits' (max, sum), exactly the no-sink merge.
  void merge(const QueryRow& r, int qh, std::int64_t out_row) {
    const int g = qh % group_;
    const bool has_sink = a_.sinks.data != nullptr;
    const float sink = has_sink ? core::sink_logit(static_cast<const float*>(a_.sinks.data)[qh]) : 0.0f;
    float lse_max = -core::kInf;
    for (int s = 0; s < a_.num_splits; ++s) lse_max = core::merge_max(lse_max, partials_[s].states[g].max);
    float merged_max = has_sink ? sink : -core::kInf;
    for (int s = 0; s < a_.num_splits; ++s) merged_max = core::merge_max(merged_max, partials_[s].states[g].max);
    float sum = has_sink ? core::merge_weight(sink, merged_max) : 0.0f;
    float lse_sum = 0.0f;
    std::fill(acc_.begin(), acc_.end(), 0.0f);
    for (int s = 0; s < a_.num_splits; ++s) {
      if (core::row_split_range(r.attended, a_.num_splits, s).empty()) continue;
      const core::SoftmaxState& st = partials_[s].states[g];
      const float w = core::merge_weight(st.max, merged_max);
      sum = core::merge_add(sum, w, st.sum);
      lse_sum = core::merge_add(lse_sum, core::merge_weight(st.max, lse_max), st.sum);
      const float* part = &partials_[s].acc[static_cast<std::size_t>(g) * dims_];
      for (int d = 0; d < dims_; ++d) acc_[d] = core::merge_add(acc_[d], w, part[d]);
    }
    for (int d = 0; d < dims_; ++d) {
      detail::store_element(a_.out.data, a_.out_dtype, out_row * dims_ + d,
                            core::finalize_output(acc_[d], sum, merged_max));
    }
    if (a_.lse.data != nullptr) static_cast<float*>(a_.lse.data)[out_row] = core::finalize_lse(lse_sum, lse_max);
  }

  const ConstCacheView& cache_;
  const DecodeArgs& a_;
  const BlockLayout& l_;
  const int dims_;
  const int group_;
  const Codebook* cb_ = nullptr;
  core::Rotation rot_;
  std::vector<float> queries_;  // [group][head_dim], prepared rows of one KV head
  std::vector<float> scratch_;
  std::vector<SplitPartials> partials_;  // [num_splits]; an empty split keeps max = -inf and weighs 0
  std::vector<float> acc_;               // [head_dim], the merge's accumulator
};

}  // namespace

Status decode_reference(const ConstCacheView& cache, const DecodeArgs& a) {
  if (Status s = validate_decode(cache, a); !s.ok()) return s;
  if (a.batch == 0) return Status();  // nothing to do, and no workspace to size
  const auto* seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  const auto* starts = static_cast<const std::int32_t*>(a.query_start_loc.data);
  ReferenceDecoder decoder(cache, a);
  for (int b = 0; b < a.batch; ++b) {
    // Rows [first, first + q_len) of sequence b sit at positions seq_len - q_len + i.
    const std::int64_t first = starts != nullptr ? starts[b] : b;
    const int q_len = starts != nullptr ? starts[b + 1] - starts[b] : 1;
    for (int i = 0; i < q_len; ++i) {
      const int position = seq_lens[b] - q_len + i;
      decoder.decode_row(QueryRow{first + i, b, core::attended_range(position, a.sliding_window)});
    }
  }
  return Status();
}

}  // namespace turboquant
