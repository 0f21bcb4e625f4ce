#include "turboquant/check/compare.hpp"

#include <cmath>

namespace turboquant::checks {

Comparison compare(std::span<const double> got, std::span<const double> want, int num_q_heads, int head_dim,
                   const std::vector<int>& sequences) {
  Comparison c;
  double diff2 = 0, want2 = 0, got2 = 0, dot = 0;
  double max_rank = -1, worst_rank = -1;
  const std::size_t rows = want.size() / static_cast<std::size_t>(head_dim);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t block = r / static_cast<std::size_t>(num_q_heads);
    const int seq = sequences.empty() ? static_cast<int>(block) : sequences[block];
    const int head = static_cast<int>(r % static_cast<std::size_t>(num_q_heads));
    double row_diff2 = 0, row_want2 = 0;
    for (int d = 0; d < head_dim; ++d) {
      const std::size_t i = r * head_dim + d;
      const double g = got[i], w = want[i], e = g - w;
      if (!std::isfinite(g)) ++c.non_finite;
      // A non-finite error ranks above every finite one.
      const double a = std::fabs(e), rank = std::isfinite(a) ? a : INFINITY;
      if (rank > max_rank) {
        max_rank = rank;
        c.max_abs = a;
        c.max_seq = seq, c.max_head = head, c.max_dim = d, c.max_row = static_cast<int>(block);
        c.got_at_max = g, c.want_at_max = w;
      }
      row_diff2 += e * e;
      row_want2 += w * w;
      got2 += g * g;
      dot += g * w;
    }
    const double row_rel = row_want2 > 0 ? std::sqrt(row_diff2 / row_want2) : std::sqrt(row_diff2);
    const double rank = std::isfinite(row_rel) ? row_rel : INFINITY;
    if (rank > worst_rank) {
      worst_rank = rank;
      c.worst_rel_l2 = row_rel;
      c.worst_seq = seq, c.worst_head = head, c.worst_row = static_cast<int>(block);
    }
    diff2 += row_diff2;
    want2 += row_want2;
  }
  c.rel_l2 = want2 > 0 ? std::sqrt(diff2 / want2) : std::sqrt(diff2);
  c.cosine = (got2 > 0 && want2 > 0) ? dot / std::sqrt(got2 * want2) : (got2 == want2 ? 1.0 : 0.0);
  return c;
}

std::vector<double> to_double(std::span<const float> x) { return std::vector<double>(x.begin(), x.end()); }

std::vector<double> select_sequences(std::span<const double> x, int num_q_heads, int head_dim,
                                     const std::vector<int>& sequences) {
  const std::size_t row = static_cast<std::size_t>(num_q_heads) * head_dim;
  std::vector<double> out;
  out.reserve(sequences.size() * row);
  for (int s : sequences) out.insert(out.end(), x.begin() + s * row, x.begin() + (s + 1) * row);
  return out;
}

}  // namespace turboquant::checks
