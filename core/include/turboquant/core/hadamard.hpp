// The rotation of current vLLM (facts §g): Pi = PiT = H / sqrt(D), H the
// Sylvester Hadamard matrix, applied as a fast Walsh-Hadamard transform in
// O(D log D). H is symmetric and H/sqrt(D) orthonormal, so the same transform
// rotates into and out of the quantization basis.
#pragma once

#include "turboquant/core/float_ops.hpp"

namespace turboquant::core {

// In-place unnormalized transform, x <- H x, n a power of two. The butterfly
// network is the contract: stage h = 1, 2, 4, ..., n/2; within a stage every
// pair (j, j + h) with (j & h) == 0 becomes (x[j] + x[j+h], x[j] - x[j+h]).
// Any implementation evaluating the same butterflies gets the same bits.
TQ_HD void fwht(float* x, int n) {
  for (int h = 1; h < n; h <<= 1) {
    for (int j = 0; j < n; ++j) {
      if (j & h) continue;
      const float a = x[j];
      const float b = x[j + h];
      x[j] = add_rn(a, b);
      x[j + h] = sub_rn(a, b);
    }
  }
}

// 1/sqrt(n) rounded to fp32, n a power of two: an exact power of two when log2(n)
// is even, else 2^-(k+1)/2 * sqrt(2) with sqrt(2) rounded once.
TQ_HD constexpr float inv_sqrt_pow2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  float r = (k % 2 == 0) ? 1.0f : 0x1.6a09e6p+0f;  // sqrt(2)
  for (int i = 0; i < (k + 1) / 2; ++i) r *= 0.5f;
  return r;
}

static_assert(inv_sqrt_pow2(64) == 0.125f);
static_assert(inv_sqrt_pow2(256) == 0.0625f);

}  // namespace turboquant::core
