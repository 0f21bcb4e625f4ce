// Where a decode keeps the partial result of each (query row, split): the
// unnormalized accumulator acc[head_dim] and the softmax state (max, sum) of
// docs/ARITHMETIC.md §5, written by the split's work item and read by the
// merge. One layout for every backend (the CPU's workspace chunks, every CUDA
// kernel and the CUDA merge), so that no kernel computes an index by hand.
//
// Two regions: accumulators at the workspace's start, then the (max, sum)
// pairs, each region starting kRegionAlign-aligned. Partial (row, split) is
// number row * split_stride + split in both; row = sequence * num_q_heads +
// query head (relative to the first row the workspace holds).
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

struct PartialLayout {
  int acc_pitch = 0;       // floats from one accumulator to the next (>= head_dim)
  int split_stride = 1;    // partials per row (>= the splits any row uses)
  std::int64_t rows = 0;   // rows the workspace holds (sizes only)

  static constexpr std::int64_t kRegionAlign = 256;  // bytes

  TQ_HD constexpr std::int64_t index(std::int64_t row, int split) const { return row * split_stride + split; }
  // Floats from the accumulator region's start to acc[0] of (row, split).
  TQ_HD constexpr std::int64_t acc_offset(std::int64_t row, int split) const { return index(row, split) * acc_pitch; }
  // Floats between the accumulators of rows r and r + 1 (same split).
  TQ_HD constexpr std::int64_t acc_row_stride() const { return std::int64_t{split_stride} * acc_pitch; }
  // Floats from the (max, sum) region's start to the max of (row, split); the sum follows.
  TQ_HD constexpr std::int64_t ml_offset(std::int64_t row, int split) const { return 2 * index(row, split); }

  // Sizes in bytes, or -1 when they do not fit in 63 bits (host only).
  constexpr std::int64_t acc_bytes() const { return product(4 * std::int64_t{acc_pitch}); }
  constexpr std::int64_t ml_bytes() const { return product(8); }
  // Bytes from the workspace's start to the (max, sum) region.
  constexpr std::int64_t ml_region_offset() const { return align_up(acc_bytes()); }
  constexpr std::int64_t total_bytes() const {
    const std::int64_t a = ml_region_offset();
    const std::int64_t m = align_up(ml_bytes());
    return a < 0 || m < 0 || a > INT64_MAX - m ? -1 : a + m;
  }

 private:
  // rows * split_stride * bytes_each, checked.
  constexpr std::int64_t product(std::int64_t bytes_each) const {
    std::int64_t n = 0;
    if (rows < 0 || split_stride < 0 || __builtin_mul_overflow(rows, std::int64_t{split_stride}, &n) ||
        __builtin_mul_overflow(n, bytes_each, &n)) {
      return -1;
    }
    return n;
  }
  static constexpr std::int64_t align_up(std::int64_t x) {
    return x < 0 || x > INT64_MAX - kRegionAlign ? -1 : (x + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
  }
};

}  // namespace turboquant::core
