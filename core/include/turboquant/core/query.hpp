// Query preparation (docs/ARITHMETIC.md §5): rotate into the quantization basis
// (Lloyd-Max keys only), then multiply by softmax_scale * log2(e) so that one
// dot product yields a base-2 logit.
#pragma once

#include "turboquant/core/exp2_log.hpp"
#include "turboquant/core/format.hpp"
#include "turboquant/core/rotation.hpp"

namespace turboquant::core {

// q: fp32 [head_dim] unrotated; out: fp32 [head_dim].
TQ_HD void prepare_query(const Format& f, const Rotation& rot, float softmax_scale, const float* q, float* out) {
  const int dims = f.head_dim;
  float rotated[kMaxHeadDim];
  const float* src = q;
  if (!f.fp8_keys()) {
    rotate_forward(rot, q, rotated, dims);
    src = rotated;
  }
  const float factor = mul_rn(softmax_scale, kLog2e);
  for (int d = 0; d < dims; ++d) out[d] = mul_rn(src[d], factor);
}

}  // namespace turboquant::core
