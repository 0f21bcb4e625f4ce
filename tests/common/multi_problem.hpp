// Multi-token decode problems (decode.hpp: query_start_loc, sinks,
// sliding_window) over a random_problem cache, and the same decode written as
// vLLM's expanded rows: one single-token row per query token with the
// synthetic length p + 1 and its sequence's block-table row repeated.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/random_problem.hpp"

namespace turboquant::testing {

struct MultiSpec {
  ProblemSpec base;          // the cache: base.seq_lens are the full lengths (query tokens included)
  std::vector<int> q_lens;   // one per sequence, each <= its seq_len
  std::vector<float> sinks;  // [Hq] or empty
  int window = 0;

  std::string name() const {
    std::string s = base.name() + "_q";
    for (int q : q_lens) s.append("-").append(std::to_string(q));
    if (window) s.append("_w").append(std::to_string(window));
    if (!sinks.empty()) s += "_sinks";
    return s;
  }
};

struct MultiProblem {
  Problem p;
  std::vector<std::int32_t> query_start_loc;  // [B + 1]
  std::vector<float> query;                   // [T, Hq, D]
  std::vector<float> sinks;
  int window = 0;
  int rows = 0;  // T
  // The expanded rows: block table [T, max_blocks] and seq_lens [T].
  std::vector<std::int32_t> expanded_table, expanded_lens;

  DecodeArgs args(std::vector<float>& out, std::vector<float>& lse, int splits = 32) const {
    const int dims = p.layout.format.head_dim;
    out.assign(static_cast<std::size_t>(rows) * p.num_q_heads * dims, -7.0f);
    lse.assign(static_cast<std::size_t>(rows) * p.num_q_heads, -7.0f);
    DecodeArgs a = host_decode_args(bytes_of(query), p.batch, p.num_q_heads, bytes_of(p.block_table), p.max_blocks,
                                    bytes_of(p.seq_lens), p.scale, splits, writable_bytes_of(out),
                                    writable_bytes_of(lse));
    a.query_start_loc = bytes_of(query_start_loc);
    a.num_query_rows = rows;
    if (!sinks.empty()) a.sinks = bytes_of(sinks);
    a.sliding_window = window;
    return a;
  }

  // The same decode as `rows` single-token sequences (no query_start_loc).
  DecodeArgs expanded_args(std::vector<float>& out, std::vector<float>& lse, int splits = 32) const {
    DecodeArgs a = args(out, lse, splits);
    a.query_start_loc = {};
    a.num_query_rows = 0;
    a.batch = rows;
    a.block_table = bytes_of(expanded_table);
    a.seq_lens = bytes_of(expanded_lens);
    return a;
  }
};

inline MultiProblem make_multi_problem(const MultiSpec& spec) {
  MultiProblem m;
  m.p = make_problem(spec.base);
  m.sinks = spec.sinks;
  m.window = spec.window;
  const int dims = m.p.layout.format.head_dim;
  m.query_start_loc.push_back(0);
  for (std::size_t b = 0; b < spec.q_lens.size(); ++b) {
    const int q_len = spec.q_lens[b];
    for (int i = 0; i < q_len; ++i) {
      m.expanded_lens.push_back(m.p.seq_lens[b] - q_len + i + 1);
      m.expanded_table.insert(m.expanded_table.end(), m.p.block_table.begin() + std::int64_t(b) * m.p.max_blocks,
                              m.p.block_table.begin() + std::int64_t(b + 1) * m.p.max_blocks);
    }
    m.query_start_loc.push_back(m.query_start_loc.back() + q_len);
  }
  m.rows = m.query_start_loc.back();
  std::mt19937_64 rng(spec.base.seed * 7919 + 13);
  std::normal_distribution<float> normal(0.0f, spec.base.query_scale);
  m.query.resize(static_cast<std::size_t>(m.rows) * m.p.num_q_heads * dims);
  for (float& q : m.query) q = normal(rng);
  return m;
}

}  // namespace turboquant::testing
