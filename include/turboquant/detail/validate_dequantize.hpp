// The dequantize checks in two halves, like detail/validate.hpp's decode and
// encode checks: shapes (no byte behind a buffer pointer is read: the CUDA
// entry points run this half) and tables (slots, block ids, seq_lens).
#pragma once

#include "turboquant/dequantize.hpp"

namespace turboquant::detail {

Status check_dequantize_shapes(const ConstCacheView& cache, const DequantizeArgs& args);
Status check_dequantize_slots(const ConstCacheView& cache, const DequantizeArgs& args);

Status check_dequantize_sequences_shapes(const ConstCacheView& cache, const DequantizeSequencesArgs& args);
Status check_dequantize_sequences_tables(const ConstCacheView& cache, const DequantizeSequencesArgs& args);

}  // namespace turboquant::detail
