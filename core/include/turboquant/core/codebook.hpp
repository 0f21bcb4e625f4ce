// A scalar codebook for Lloyd-Max key codes (facts §f): sorted fp32 centroids
// and the midpoints derived from them in fp32, (c[i] + c[i+1]) / 2, exactly as
// vLLM's backend recomputes them. The tables themselves come from
// lloyd_max.hpp (host) or from a caller that decodes another producer's cache.
#pragma once

#include "turboquant/core/float_ops.hpp"
#include "turboquant/core/format.hpp"

namespace turboquant::core {

struct Codebook {
  int bits = 0;  // 1..4; size() = 2^bits entries
  float centroids[kMaxCodebookSize] = {};
  float midpoints[kMaxCodebookSize - 1] = {};

  TQ_HD constexpr int size() const { return 1 << bits; }

  // Index of the code for y: the number of midpoints <= y (ties go to the upper
  // centroid, as torch.bucketize(right=True) and vLLM's binary search do; NaN
  // maps to 0). Equal to a binary search because midpoints are sorted.
  TQ_HD int bucketize(float y) const {
    int idx = 0;
    for (int i = 0; i < size() - 1; ++i) idx += (y >= midpoints[i]) ? 1 : 0;
    return idx;
  }
};

// Builds a codebook from 2^bits sorted centroids, deriving the midpoints.
TQ_HD Codebook make_codebook(int bits, const float* sorted_centroids) {
  Codebook cb;
  cb.bits = bits;
  for (int i = 0; i < cb.size(); ++i) cb.centroids[i] = sorted_centroids[i];
  for (int i = 0; i + 1 < cb.size(); ++i) cb.midpoints[i] = div_rn(add_rn(cb.centroids[i], cb.centroids[i + 1]), 2.0f);
  return cb;
}

}  // namespace turboquant::core
