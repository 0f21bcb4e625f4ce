// Multi-token decode problems (decode.hpp: query_start_loc, sinks,
// sliding_window) over a random_problem cache, and the same decode written as
// vLLM's expanded rows: one single-token row per query token with the
// synthetic length p + 1 and its sequence's block-table row repeated.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/random_problem.hpp"
#include "turboquant/format.hpp"

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

// The rows, sinks and window of `spec` over the cache p (made from spec.base).
inline MultiProblem multi_rows(Problem p, const MultiSpec& spec) {
  MultiProblem m;
  m.p = std::move(p);
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

inline MultiProblem make_multi_problem(const MultiSpec& spec) { return multi_rows(make_problem(spec.base), spec); }

// ---- the shared grid of the multi-token tests ------------------------------

// Sinks across -1e4 .. 1e4 (one head far below, one far above the scores).
inline std::vector<float> sink_values(int heads, std::uint32_t seed) {
  static const float kSinks[] = {-1e4f, -2.0f, 0.0f, 0.5f, 3.0f, 8.0f, 1e4f, -0.75f, 40.0f, 1.25f};
  std::vector<float> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = kSinks[(h + seed) % 10];
  return s;
}

struct Combo {
  Preset preset;
  LayoutKind layout;
  int head_dim, group;
  std::vector<int> seq_lens, q_lens;
  int window;
  bool sinks;
  int splits;
};

inline MultiSpec spec_of(const Combo& c, std::uint32_t seed) {
  MultiSpec m;
  m.base.format = preset_format(c.preset, c.head_dim, c.layout);
  m.base.group = c.group;
  m.base.seq_lens = c.seq_lens;
  m.base.seed = seed;
  m.q_lens = c.q_lens;
  m.window = c.window;
  if (c.sinks) m.sinks = sink_values(m.base.num_kv_heads * c.group, seed);
  return m;
}

// q_len 1, 2, 4, 8, 16, 128; GQA 1/4/8; windows shorter and longer than the
// sequences; with and without sinks; 32 splits and a few.
inline std::vector<Combo> combos() {
  struct Rows {
    std::vector<int> seq_lens, q_lens;
  };
  const Rows rows[] = {{{40, 3, 170}, {1, 2, 4}}, {{33, 120, 16}, {8, 16, 1}}, {{200}, {128}}};
  const struct {
    int window;
    bool sinks;
  } extras[] = {{0, false}, {0, true}, {7, true}, {48, false}, {4096, true}};
  const struct {
    Preset preset;
    LayoutKind layout;
    int head_dim;
  } formats[] = {{Preset::k4BitNc, LayoutKind::kSoA, 128},
                 {Preset::kK8V4, LayoutKind::kAoS, 128},
                 {Preset::kK3V4Nc, LayoutKind::kSoA, 64},
                 {Preset::k4BitNc, LayoutKind::kAoS, 64}};
  std::vector<Combo> out;
  int i = 0;
  for (const Rows& r : rows) {
    for (int group : {1, 4, 8}) {
      for (const auto& e : extras) {
        const auto& f = formats[i % 4];
        out.push_back({f.preset, f.layout, f.head_dim, group, r.seq_lens, r.q_lens, e.window, e.sinks,
                       i % 3 == 2 ? 3 : 32});
        ++i;
      }
    }
  }
  return out;
}

}  // namespace turboquant::testing
