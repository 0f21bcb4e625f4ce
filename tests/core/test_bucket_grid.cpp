// bucketize_on_grid equals Codebook::bucketize: on vLLM's codebooks (every
// head_dim, 1 to 4 bits) and on random sorted codebooks, for values spread
// over the codebook's range, every midpoint and its neighbouring floats,
// signed zeros, infinities and NaN. A grid that cannot separate two midpoints
// says so (usable = false).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "turboquant/codebook.hpp"
#include "turboquant/core/bucket_grid.hpp"

namespace {

using namespace turboquant::core;

int grid_mismatches(const Codebook& cb, std::mt19937& rng) {
  const BucketGrid g = make_bucket_grid(cb);
  EXPECT_TRUE(g.usable);
  std::vector<BucketCell> cells(BucketGrid::kCells);
  for (int c = 0; c < BucketGrid::kCells; ++c) cells[c] = bucket_cell(g, cb, c);
  std::vector<float> ys = {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f};
  for (int j = 0; j + 1 < cb.size(); ++j) {
    float m = cb.midpoints[j];
    ys.push_back(m);
    float up = m, down = m;
    for (int k = 0; k < 4; ++k) {
      up = std::nextafter(up, kInf);
      down = std::nextafter(down, -kInf);
      ys.push_back(up);
      ys.push_back(down);
    }
  }
  const float span = cb.centroids[cb.size() - 1] - cb.centroids[0];
  std::uniform_real_distribution<float> wide(cb.centroids[0] - span, cb.centroids[cb.size() - 1] + span);
  for (int i = 0; i < 200'000; ++i) ys.push_back(wide(rng));
  int bad = 0;
  for (float y : ys) {
    const int got = bucketize_on_grid(g, cells.data(), y);
    if (got != cb.bucketize(y)) {
      if (++bad <= 3) ADD_FAILURE() << "y " << y << ": grid " << got << ", bucketize " << cb.bucketize(y);
    }
  }
  return bad;
}

TEST(BucketGrid, EqualsBucketizeOnVllmCodebooks) {
  std::mt19937 rng(3);
  for (int dims : {64, 128, 256}) {
    for (int bits = 1; bits <= 4; ++bits) {
      SCOPED_TRACE("D " + std::to_string(dims) + " bits " + std::to_string(bits));
      EXPECT_EQ(grid_mismatches(turboquant::vllm_codebook(dims, bits), rng), 0);
    }
  }
}

TEST(BucketGrid, EqualsBucketizeOnRandomSortedCodebooks) {
  std::mt19937 rng(5);
  std::lognormal_distribution<float> gap(0.0f, 1.0f);
  std::uniform_real_distribution<float> start(-3.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int bits = 1 + trial % 4;
    float c[16];
    c[0] = start(rng);
    for (int i = 1; i < (1 << bits); ++i) c[i] = c[i - 1] + 0.01f + gap(rng);
    const Codebook cb = make_codebook(bits, c);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(grid_mismatches(cb, rng), 0);
  }
}

TEST(BucketGrid, MidpointsTooCloseForTheGridAreNotUsable) {
  // Three midpoints a few ulp apart in the middle of a span of 30.
  float c[8] = {0.0f, 10.0f, 0.0f, 0.0f, 0.0f, 20.0f, 30.0f, 40.0f};
  for (int i = 2; i < 5; ++i) c[i] = std::nextafter(c[i - 1], kInf);
  EXPECT_FALSE(make_bucket_grid(make_codebook(3, c)).usable);
  const float equal[4] = {0.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_FALSE(make_bucket_grid(make_codebook(2, equal)).usable);
}

}  // namespace
