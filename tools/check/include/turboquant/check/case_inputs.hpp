// The ValidationInputs of a case directory (tools/io): what tq validate and
// the tests check a case's output with.
#pragma once

#include <span>
#include <string>

#include "turboquant/check/cache_check.hpp"
#include "turboquant/check/validate.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant::checks {

// The case's decode (cache, query, tables, scale, splits), its original K/V
// when keys.npy, values.npy and slot_mapping.npy are all present, and its
// reference_out_f64 when present, and its query_start_loc, sinks and
// sliding_window when loaded; `output` float32 [T, Hq, D] is under test.
// The spans point into `c` and `output`, which must outlive the result.
ValidationInputs case_validation_inputs(const io::CaseDir& c, const Codebook* codebook, std::span<const float> output,
                                        std::string output_name);

// The CacheCheckInputs of a case (keys, values and slot_mapping loaded) for
// `cache` under test (a cache of the case's layout, e.g. another store's
// kv_cache.npy). The spans point into `c`, which must outlive the result.
CacheCheckInputs case_cache_check_inputs(const io::CaseDir& c, const Codebook* codebook, const ConstCacheView& cache,
                                         std::string cache_name);

}  // namespace turboquant::checks
