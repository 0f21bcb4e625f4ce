// Decode attention over a paged TurboQuant cache: one query token per sequence.
//   out[b, hq, :] = softmax(scale * q . K_b^T) V_b over the seq_lens[b] tokens
// of sequence b, read through block_table[b]; query head hq uses KV head
// hq / (Hq / Hk). Work is cut into splits (split_plan.hpp), each yields a
// partial softmax state, and the partials are merged (docs/ARITHMETIC.md).
#pragma once

#include <cstdint>

#include "turboquant/cache_view.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant {

struct DecodeArgs {
  ConstBuffer query;  // [batch, num_q_heads, head_dim] of query_dtype, unrotated
  DType query_dtype = DType::kFloat32;
  int batch = 0;
  int num_q_heads = 0;  // a multiple of the cache's num_kv_heads
  ConstBuffer block_table;  // int32 [batch, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  ConstBuffer seq_lens;  // int32 [batch]; seq_lens[b] <= max_blocks_per_seq * block_size
  float softmax_scale = 0.0f;  // finite; usually 1/sqrt(head_dim)
  int num_splits = 32;         // vLLM's NUM_KV_SPLITS, 1..1024
  MutableBuffer out;           // [batch, num_q_heads, head_dim] of out_dtype
  DType out_dtype = DType::kFloat32;
  MutableBuffer lse;  // optional float32 [batch, num_q_heads], natural log; empty: not written
  const Codebook* codebook = nullptr;  // Lloyd-Max keys: default vllm_codebook(head_dim, key_bits)
  ConstBuffer rotation;                // optional dense PiT fp32 [D][D]; empty: Hadamard
  bool check_finite = true;            // reject NaN/Inf in the query
};

// The golden model: scalar, single-threaded. seq_len 0 gives a zero output row
// and LSE -inf (vLLM returns NaN there).
Status decode_reference(const ConstCacheView& cache, const DecodeArgs& args);

// Checks shapes, buffers, block-table entries and seq_lens before any output
// byte is written; every backend calls it first.
Status validate_decode(const ConstCacheView& cache, const DecodeArgs& args);

}  // namespace turboquant
