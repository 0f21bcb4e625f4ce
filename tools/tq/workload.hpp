// tq bench's synthetic workload: B sequences of L tokens, random K/V (values
// rounded to bf16, as vLLM stores them) placed through a shuffled block table,
// random queries (q_len rows per sequence: vLLM's query_start_loc when > 1),
// optional random sinks and a sliding window (ARITHMETIC.md §7); and a CPU memory read-bandwidth probe, the ceiling the decode
// is measured against.
#pragma once

#include <cstdint>
#include <vector>

namespace tq {

struct WorkloadSpec {
  int batch = 4;
  int seq_len = 8192;
  int q_heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  int block_size = 16;
  int q_len = 1;        // query rows per sequence; > 1: query_start_loc
  bool sinks = false;   // random sinks [Hq]
  int window = 0;       // sliding window W; 0: none
  std::uint64_t seed = 1;
};

struct Workload {
  WorkloadSpec spec;
  std::int64_t num_tokens = 0;            // batch * seq_len, sequence-major
  std::vector<float> keys;                // [num_tokens, Hk, D], N(0, 1)
  std::vector<float> values;              // [num_tokens, Hk, D], N(0, 1) rounded to bf16
  std::vector<float> query;               // [T, Hq, D], N(0, 1); T = B * q_len
  std::vector<std::int32_t> query_start_loc;  // [B + 1] when q_len > 1, else empty
  std::vector<float> sinks;               // [Hq], N(0, 1) + 2 (a sink comparable to the scores), or empty
  std::vector<std::int64_t> slots;        // [num_tokens]: slot of token i
  std::vector<std::int32_t> block_table;  // [B, max_blocks]
  std::vector<std::int32_t> seq_lens;     // [B]
  int max_blocks = 0;
  std::int64_t num_blocks = 0;
};

Workload make_workload(const WorkloadSpec& spec, int threads);

// Read bandwidth of a buffer much larger than the caches, GB/s (1e9 B/s), best of a few passes.
double probe_read_gbps(int threads);

}  // namespace tq
