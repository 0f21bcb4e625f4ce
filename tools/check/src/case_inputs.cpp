#include "turboquant/check/case_inputs.hpp"

#include <utility>

namespace turboquant::checks {

ValidationInputs case_validation_inputs(const io::CaseDir& c, const Codebook* codebook, std::span<const float> output,
                                        std::string output_name) {
  ValidationInputs in;
  in.cache = io::case_cache(c);
  in.codebook = codebook;
  in.query = c.query.values;
  in.batch = static_cast<int>(c.batch);
  in.num_q_heads = c.num_q_heads;
  in.block_table = c.block_table.values;
  in.max_blocks_per_seq = static_cast<int>(c.max_blocks_per_seq);
  in.seq_lens = c.seq_lens.values;
  in.scale = c.scale;
  in.num_splits = c.num_kv_splits;
  if (c.query_start_loc.present) {
    in.query_start_loc = c.query_start_loc.values;
    in.num_query_rows = static_cast<int>(c.num_query_rows);
  }
  if (c.sinks.present) in.sinks = c.sinks.values;
  in.sliding_window = c.sliding_window;
  in.output = output;
  in.output_name = std::move(output_name);
  if (c.keys.present && c.values.present && c.slot_mapping.present) {
    in.original = OriginalKV{c.keys.values, c.values.values, c.slot_mapping.values};
  }
  in.original_absent_note = "the case has no keys.npy/values.npy/slot_mapping.npy";
  if (c.reference_out_f64.present) in.reference_out_f64 = c.reference_out_f64.values;
  return in;
}

CacheCheckInputs case_cache_check_inputs(const io::CaseDir& c, const Codebook* codebook, const ConstCacheView& cache,
                                         std::string cache_name) {
  CacheCheckInputs in;
  in.cache = cache;
  in.codebook = codebook;
  in.original = OriginalKV{c.keys.values, c.values.values, c.slot_mapping.values};
  in.cache_name = std::move(cache_name);
  return in;
}

}  // namespace turboquant::checks
