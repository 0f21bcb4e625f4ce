// Loads query row `row` of a decode call and prepares it (core/query.hpp).
#pragma once

#include "turboquant/core/query.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/detail/elements.hpp"

namespace turboquant::detail {

inline void prepare_query_row(const DecodeArgs& a, const Format& f, const core::Rotation& rot, std::int64_t row,
                              float* out) {
  float q[core::kMaxHeadDim];
  load_row(a.query.data, a.query_dtype, row * f.head_dim, f.head_dim, q);
  core::prepare_query(f, rot, a.softmax_scale, q, out);
}

}  // namespace turboquant::detail
