// Dequantize one token-head record (docs/ARITHMETIC.md §5, "Dequantize"): the
// golden model's definition (cpu/reference/dequantize_ref.cpp). The CUDA
// kernel (gpu/src/dequantize.cuh) runs the same steps on a group of lanes,
// with group_contract.cuh's exact reductions for dot16 and the FWHT, so its
// fp32 results are the same bits (tests/gpu/test_gpu_dequantize.cpp).
#pragma once

#include "turboquant/core/rotation.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::core {

// K of (t, h): Lloyd-Max keys fl(c[idx_d] * n_t) with n_t = decode_key_norm
// (AoS: the decode-time norm correction), rotated back to the original basis
// when `original` (rotate_inverse); FP8 keys their FP8 values in either basis
// (they are stored unrotated). V: dequant_value of each code. k, v and
// `scratch` hold head_dim floats; k and scratch must not alias.
TQ_HD void dequantize_token_head(const BlockLayout& l, const std::uint8_t* block, int t, int h, const Codebook& cb,
                                 const Rotation& rot, bool original, float* k, float* v, float* scratch) {
  const int dims = l.format.head_dim;
  if (l.format.fp8_keys()) {
    decode_key_direction(l, block, t, h, cb, k);
  } else {
    float* direction = original ? scratch : k;
    decode_key_direction(l, block, t, h, cb, direction);
    const float norm = decode_key_norm(l, block, t, h, direction);
    for (int d = 0; d < dims; ++d) direction[d] = mul_rn(direction[d], norm);
    if (original) rotate_inverse(rot, direction, k, dims);
  }
  decode_value(l, block, t, h, v);
}

}  // namespace turboquant::core
