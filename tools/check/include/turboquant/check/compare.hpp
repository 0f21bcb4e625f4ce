// How far one attention output [B, Hq, D] is from another: relative L2 error,
// the largest absolute error and where it is, cosine similarity, the worst
// (sequence, head). Everything in float64.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace turboquant::checks {

struct Comparison {
  double rel_l2 = 0;  // ||got - want|| / ||want|| (||got - want|| when want is 0)
  double max_abs = 0;
  int max_seq = 0, max_head = 0, max_dim = 0;  // where max_abs is
  int max_row = 0;                             // the query row of max_abs (= max_seq with one row per sequence)
  double got_at_max = 0, want_at_max = 0;
  double cosine = 1;
  int worst_seq = 0, worst_head = 0;  // the (sequence, head) with the largest rel L2
  int worst_row = 0;                  // its query row
  double worst_rel_l2 = 0;
  std::int64_t non_finite = 0;  // NaN/Inf values in `got`
};

// `got` and `want` are [rows, D] with rows = T * Hq (T query rows, one per
// sequence or several); `sequences` names the sequence of each block of Hq
// rows, i.e. of each query row (empty: 0, 1, 2, ...).
Comparison compare(std::span<const double> got, std::span<const double> want, int num_q_heads, int head_dim,
                   const std::vector<int>& sequences = {});

std::vector<double> to_double(std::span<const float> x);

// Rows of [B, Hq, D] for the listed sequences only.
std::vector<double> select_sequences(std::span<const double> x, int num_q_heads, int head_dim,
                                     const std::vector<int>& sequences);

}  // namespace turboquant::checks
