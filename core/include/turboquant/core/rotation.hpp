// Rotation into the quantization basis (facts §g): y = x @ PiT. By default
// PiT = H / sqrt(D) (fast Walsh-Hadamard); a caller may supply any dense DxD
// PiT (row-major, fp32) to read caches of older producers (random signs, QR).
#pragma once

#include "turboquant/core/hadamard.hpp"

namespace turboquant::core {

struct Rotation {
  const float* pit = nullptr;  // nullptr: Hadamard; else row-major [D][D], y[j] = sum_i x[i] * pit[i][j]
};

// out = in @ PiT. Hadamard: FWHT, then each element times inv_sqrt_pow2(D).
// Dense: out[j] = fma chain over i = 0..D-1 from +0.
TQ_HD void rotate_forward(const Rotation& r, const float* in, float* out, int dims) {
  if (r.pit == nullptr) {
    for (int d = 0; d < dims; ++d) out[d] = in[d];
    fwht(out, dims);
    const float norm = inv_sqrt_pow2(dims);
    for (int d = 0; d < dims; ++d) out[d] = mul_rn(out[d], norm);
    return;
  }
  for (int j = 0; j < dims; ++j) {
    float s = 0.0f;
    for (int i = 0; i < dims; ++i) s = fma_rn(in[i], r.pit[static_cast<std::int64_t>(i) * dims + j], s);
    out[j] = s;
  }
}

// out = in @ Pi = in @ PiT^T (back to the original basis).
TQ_HD void rotate_inverse(const Rotation& r, const float* in, float* out, int dims) {
  if (r.pit == nullptr) {
    rotate_forward(r, in, out, dims);  // H/sqrt(D) is symmetric and its own inverse
    return;
  }
  for (int i = 0; i < dims; ++i) {
    float s = 0.0f;
    for (int j = 0; j < dims; ++j) s = fma_rn(in[j], r.pit[static_cast<std::int64_t>(i) * dims + j], s);
    out[i] = s;
  }
}

}  // namespace turboquant::core
