// Codebook::bucketize as one table lookup and one comparison, for encoders
// that quantize many values with one codebook (the GPU encode).
//
// A uniform grid of kCells cells covers the midpoints; cell(y) =
// clamp(floor(fma(y, scale, offset)), 0, kCells - 1) is monotone in y. When
// every cell holds at most one midpoint (`usable`), the midpoints in lower
// cells are all < y and those in higher cells all > y, so with
// first = the number of midpoints in cells below cell(y):
//   bucketize(y) = first + (y >= midpoints[first])   (past the last: NaN, never >=).
// NaN goes to cell 0 and compares false: 0, as bucketize.
#pragma once

#include "turboquant/core/codebook.hpp"
#include "turboquant/core/float_ops.hpp"

namespace turboquant::core {

struct BucketGrid {
  static constexpr int kCells = 256;
  float scale = 0.0f;
  float offset = 0.0f;
  bool usable = false;  // every cell holds at most one midpoint

  TQ_HD int cell(float y) const {
    float t = fma_rn(y, scale, offset);
    t = t > 0.0f ? t : 0.0f;  // NaN -> 0
    t = t < static_cast<float>(kCells - 1) ? t : static_cast<float>(kCells - 1);
    return static_cast<int>(t);  // floor: t >= 0
  }
};

// One cell: the number of midpoints in lower cells and the next midpoint.
struct BucketCell {
  int first = 0;
  float midpoint = 0.0f;
};

// Places the midpoints at cells 1 .. kCells - 1 and checks that no two share a cell.
TQ_HD BucketGrid make_bucket_grid(const Codebook& cb) {
  BucketGrid g;
  const int n = cb.size() - 1;  // midpoints
  if (n < 1) return g;
  const float lo = cb.midpoints[0];
  const float hi = cb.midpoints[n - 1];
  const float span = sub_rn(hi, lo);
  g.scale = n == 1 ? 1.0f : div_rn(static_cast<float>(BucketGrid::kCells - 2), span);
  g.offset = sub_rn(1.0f, mul_rn(lo, g.scale));
  if (!is_finite(g.scale) || !is_finite(g.offset) || !(g.scale > 0.0f)) return g;
  g.usable = true;
  for (int j = 0; j + 1 < n; ++j) {
    if (!(g.cell(cb.midpoints[j]) < g.cell(cb.midpoints[j + 1]))) g.usable = false;
  }
  return g;
}

TQ_HD BucketCell bucket_cell(const BucketGrid& g, const Codebook& cb, int c) {
  const int n = cb.size() - 1;
  BucketCell e;
  while (e.first < n && g.cell(cb.midpoints[e.first]) < c) ++e.first;
  e.midpoint = e.first < n ? cb.midpoints[e.first] : bits_float(0x7fc00000u);  // y >= NaN is false, even for +inf
  return e;
}

TQ_HD int bucketize_on_grid(const BucketGrid& g, const BucketCell* cells, float y) {
  const BucketCell e = cells[g.cell(y)];
  return e.first + (y >= e.midpoint ? 1 : 0);
}

}  // namespace turboquant::core
