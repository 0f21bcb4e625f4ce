// render_report and render_decode_header: tq validate's text, byte for byte.
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "text.hpp"
#include "turboquant/check/validate.hpp"

namespace turboquant::checks {

namespace internal {

std::string sprintf_string(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string s;
  if (n > 0) {
    s.resize(static_cast<std::size_t>(n) + 1);
    std::vsnprintf(s.data(), s.size(), format, again);
    s.resize(static_cast<std::size_t>(n));
  }
  va_end(again);
  return s;
}

}  // namespace internal

using internal::sprintf_string;

namespace {

// " row 5" beside a sequence when the report has multi-token rows; nothing
// otherwise (the one-row-per-sequence text stays as it was).
std::string row_text(const ValidationReport& r, const char* format, int row) {
  return r.multi_row ? sprintf_string(format, row) : std::string();
}

}  // namespace

std::string render_report(const ValidationReport& r) {
  std::string s = sprintf_string("  %-37s %10s %10s %12s   %s\n", "comparison", "rel L2", "max abs", "cosine",
                                 "worst head (rel L2)");
  for (const ValidationRow& row : r.rows) {
    const Comparison& c = row.cmp;
    s += sprintf_string("  %-37s %10.3e %10.3e %12.8f   seq %d%s head %d (%.3e)%s%s\n", row.name.c_str(), c.rel_l2,
                        c.max_abs, c.cosine, c.worst_seq, row_text(r, " row %d", c.worst_row).c_str(), c.worst_head,
                        c.worst_rel_l2, row.note.empty() ? "" : "  ", row.note.c_str());
  }
  if (!r.format_error_measured) s += sprintf_string("  (format error not measured: %s)\n", r.original_note.c_str());
  s += "\n";
  const Comparison& g = r.vs_golden();
  const char* name = r.output_name.c_str();
  if (g.non_finite > 0) {
    s += sprintf_string("%s has %lld non-finite values\n", name, static_cast<long long>(g.non_finite));
  }
  if (r.oracle_non_finite > 0) {
    s += sprintf_string(
        "the f64 oracle has %lld non-finite values: the cache holds non-finite metadata (see tq inspect)\n",
        static_cast<long long>(r.oracle_non_finite));
  }
  s += sprintf_string("max abs error vs golden at sequence %d%s, head %d, dim %d: %.9g (golden %.9g)\n", g.max_seq,
                      row_text(r, " row %d", g.max_row).c_str(), g.max_head, g.max_dim, g.got_at_max, g.want_at_max);
  if (r.pass) return s + sprintf_string("PASS  %s: rel L2 vs golden %.3e <= rtol %.1e\n", name, g.rel_l2, r.rtol);
  // A kernel whose error exceeds the format's own is wrong, not lossy.
  std::string why;
  const Comparison* f = r.format_error();
  const double format_error = f != nullptr ? f->rel_l2 : NAN;
  if (std::isfinite(format_error) && format_error > 0 && std::isfinite(g.rel_l2)) {
    why = g.rel_l2 > format_error
              ? sprintf_string(
                    "; the kernel error is %.1fx the format's own error (%.3e): the kernel is wrong, not the format",
                    g.rel_l2 / format_error, format_error)
              : sprintf_string("; format error for comparison: %.3e", format_error);
  }
  return s + sprintf_string("FAIL  %s: rel L2 vs golden %.3e > rtol %.1e; worst head: sequence %d%s, head %d (rel L2 "
                            "%.3e)%s\n",
                            name, g.rel_l2, r.rtol, g.worst_seq, row_text(r, " row %d", g.worst_row).c_str(),
                            g.worst_head, g.worst_rel_l2, why.c_str());
}

std::string join_ints(std::span<const std::int32_t> v, std::size_t limit) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < limit; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > limit) s += ", ...";
  return s;
}

std::string render_decode_header(const ValidationInputs& in, const std::string& preset) {
  const BlockLayout& l = in.cache.layout;
  std::string extras;
  if (!in.query_start_loc.empty()) {
    std::vector<std::int32_t> q_lens;
    for (std::size_t b = 0; b + 1 < in.query_start_loc.size(); ++b) {
      q_lens.push_back(in.query_start_loc[b + 1] - in.query_start_loc[b]);
    }
    extras += sprintf_string("; %d query rows (q_len %s)", in.num_query_rows, join_ints(q_lens).c_str());
  }
  if (!in.sinks.empty()) extras += "; sinks";
  if (in.sliding_window != 0) extras += sprintf_string("; sliding_window %d", in.sliding_window);
  return sprintf_string("format   %s: %s; block_size %d, Hk %d, Hq %d\n", preset.c_str(), describe(l.format).c_str(),
                        l.block_size, l.num_kv_heads, in.num_q_heads) +
         sprintf_string("decode   %d sequences, seq_lens %s%s; %d splits; scale %.9g; golden = cpu-ref\n", in.batch,
                        join_ints(in.seq_lens).c_str(), extras.c_str(), in.num_splits, in.scale);
}

}  // namespace turboquant::checks
