// Per-vector quantization math of the store (facts §d, §e), shared by every
// encoder. Order of operations: docs/ARITHMETIC.md §encode.
#pragma once

#include "turboquant/core/codebook.hpp"
#include "turboquant/core/reduction.hpp"

namespace turboquant::core {

inline constexpr float kNormEpsilon = 1e-8f;        // added to ||k|| before dividing (facts §d.1)
inline constexpr float kCorrectionEpsilon = 1e-16f;  // added to sum c^2 under the sqrt (facts §d.3)
inline constexpr float kMinValueScale = 1e-8f;      // value scale floor (facts §e)

// Each formula below is split into its reduction (dot16, a min/max scan),
// which a backend may evaluate its own way as long as it gives the contract's
// bits, and a finishing step that every backend calls.

// ||k|| and the divisor of the normalization, from sum_sq = dot16(k, k).
struct KeyDenominator {
  float norm;   // sqrt(sum_sq)
  float denom;  // norm + 1e-8
};
TQ_HD KeyDenominator key_denominator(float sum_sq) {
  const float norm = sqrt_rn(sum_sq);
  return KeyDenominator{norm, add_rn(norm, kNormEpsilon)};
}

// x_hat[d] = k[d] / (||k|| + 1e-8); returns ||k|| = sqrt(dot16(k, k)).
TQ_HD float normalize_key(const float* k, int dims, float* x_hat) {
  const KeyDenominator kd = key_denominator(dot16(k, k, dims));
  for (int d = 0; d < dims; ++d) x_hat[d] = div_rn(k[d], kd.denom);
  return kd.norm;
}

// The norm correction (facts §d.3): norm * (1 / sqrt(sum c^2 + 1e-16)) for
// centroid_sum_sq = dot16(c, c) of the reconstruction c[d] = centroids[idx[d]],
// so that c * corrected has exactly the original norm. The one function for
// both conventions: SoA applies it at store to the fp32 ||k|| (the stored
// norm), AoS at decode and dequantize to the stored fp16 ||k||.
// inv_sqrt(x) = 1 / sqrt(x): the bit-exact backends take ExactInvSqrt (the default); the
// fast CUDA decode (not bit-exact) passes the hardware's approximate
// reciprocal square root.
struct ExactInvSqrt {
  TQ_HD float operator()(float x) const { return div_rn(1.0f, sqrt_rn(x)); }
};
template <class InvSqrt = ExactInvSqrt>
TQ_HD float corrected_key_norm(float norm, float centroid_sum_sq, InvSqrt inv_sqrt = {}) {
  return mul_rn(norm, inv_sqrt(add_rn(centroid_sum_sq, kCorrectionEpsilon)));
}

// The key norm a store writes: corrected when the format folds the correction
// at store (Format::norm_folded_at_store), else ||k|| (the sum is then unused).
TQ_HD float stored_key_norm(float norm, float centroid_sum_sq, bool fold_correction) {
  return fold_correction ? corrected_key_norm(norm, centroid_sum_sq) : norm;
}
TQ_HD float stored_key_norm(float norm, const float* centroid_values, int dims, bool fold_correction) {
  return fold_correction ? corrected_key_norm(norm, dot16(centroid_values, centroid_values, dims)) : norm;
}

// The norm a key's scores and its dequantized K are multiplied by, from the
// stored norm: corrected here when the format corrects at decode (AoS, from
// centroid_sum_sq = dot16(c, c)), else the stored norm as it is.
template <class InvSqrt = ExactInvSqrt>
TQ_HD float decoded_key_norm(float stored_norm, float centroid_sum_sq, bool correct_at_decode, InvSqrt inv_sqrt = {}) {
  return correct_at_decode ? corrected_key_norm(stored_norm, centroid_sum_sq, inv_sqrt) : stored_norm;
}

// The value range by sequential comparison (exact; any order gives the same
// numbers except for the sign of a zero extreme).
struct ValueRange {
  float min;
  float max;
};
TQ_HD ValueRange value_range(const float* v, int dims) {
  float mn = v[0];
  float mx = v[0];
  for (int d = 1; d < dims; ++d) {
    mn = v[d] < mn ? v[d] : mn;
    mx = v[d] > mx ? v[d] : mx;
  }
  return ValueRange{mn, mx};
}

// scale = (max - min) / (2^bits - 1), floored at 1e-8 (also for NaN).
TQ_HD float value_scale(float min, float max, int bits) {
  const float scale = div_rn(sub_rn(max, min), static_cast<float>((1 << bits) - 1));
  return scale > kMinValueScale ? scale : kMinValueScale;
}

struct ValueParams {
  float scale = 0.0f;  // fp32, before fp16 rounding
  float zero = 0.0f;   // the minimum
};

TQ_HD ValueParams value_params(ValueRange r, int bits) { return ValueParams{value_scale(r.min, r.max, bits), r.min}; }
TQ_HD ValueParams value_params(const float* v, int dims, int bits) { return value_params(value_range(v, dims), bits); }

// code = clamp(trunc(q + 0.5), 0, 2^bits - 1) for q = (v - zero) / scale:
// round half up.
TQ_HD int value_code_of_quotient(float q, int bits) {
  const int levels = (1 << bits) - 1;
  const float t = add_rn(q, 0.5f);
  if (!(t >= 0.0f)) return 0;  // also NaN
  if (t >= static_cast<float>(levels)) return levels;
  return static_cast<int>(t);
}

TQ_HD float value_quotient(float v, const ValueParams& p) { return div_rn(sub_rn(v, p.zero), p.scale); }

TQ_HD int value_code(float v, const ValueParams& p, int bits) { return value_code_of_quotient(value_quotient(v, p), bits); }

// Reconstruction from the stored fp16 scale and zero (already widened to fp32).
// The code as a float is exact (< 2^24), so a backend that forms it some other
// way (the strict CUDA kernel: (2^23 + code) - 2^23, no I2F) calls the float form.
TQ_HD float dequant_value(float exact_code, float scale, float zero) { return fma_rn(exact_code, scale, zero); }
TQ_HD float dequant_value(int code, float scale, float zero) { return dequant_value(static_cast<float>(code), scale, zero); }

}  // namespace turboquant::core
