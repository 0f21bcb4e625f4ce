// The contract's dot product (docs/ARITHMETIC.md §dot): 16 lanes, lane j
// accumulates dims j, j+16, j+32, ... in increasing order with fused
// multiply-adds starting from +0; then a fixed tree adds lane j and j+8, then
// j+4, j+2, j+1. One AVX-512 register, two AVX2 registers, or a half warp with
// shfl_xor(8, 4, 2, 1) all evaluate exactly this. n must be a multiple of 16.
#pragma once

#include "turboquant/core/float_ops.hpp"
#include "turboquant/core/format.hpp"

namespace turboquant::core {

// Adds the 16 lanes in the contract's tree order (destroys `lanes`).
TQ_HD float reduce_lanes16(float* lanes) {
  for (int width = kLaneCount / 2; width >= 1; width >>= 1) {
    for (int j = 0; j < width; ++j) lanes[j] = add_rn(lanes[j], lanes[j + width]);
  }
  return lanes[0];
}

TQ_HD float dot16(const float* a, const float* b, int n) {
  float lanes[kLaneCount];
  for (int j = 0; j < kLaneCount; ++j) lanes[j] = 0.0f;
  for (int base = 0; base < n; base += kLaneCount) {
    for (int j = 0; j < kLaneCount; ++j) lanes[j] = fma_rn(a[base + j], b[base + j], lanes[j]);
  }
  return reduce_lanes16(lanes);
}

}  // namespace turboquant::core
