// Decode attention over a paged TurboQuant cache.
//   out[r, hq, :] = softmax(scale * q_r . K^T) V over the tokens query row r
// attends to (its sequence's causal prefix, cut by the sliding window), read
// through block_table[b]; query head hq uses KV head hq / (Hq / Hk). Work is
// cut into splits (split_plan.hpp), each yields a partial softmax state, and
// the partials are merged (docs/ARITHMETIC.md §5, §7).
//
// Rows. Without query_start_loc there is one query row per sequence (row b is
// sequence b, at position seq_lens[b] - 1). With it, sequence b owns rows
// query_start_loc[b] .. query_start_loc[b+1]-1 (q_len_b of them, vLLM's
// convention): row query_start_loc[b] + i sits at position
// p = seq_lens[b] - q_len_b + i (its tokens are stored already, as in vLLM)
// and attends causally to positions <= p. Either way a row at position p
// attends to [max(0, p - W + 1), p] with a sliding window W, else [0, p].
#pragma once

#include <cstdint>

#include "turboquant/cache_view.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant {

struct DecodeArgs {
  ConstBuffer query;  // [T, num_q_heads, head_dim] of query_dtype, unrotated (T: decode_query_rows)
  DType query_dtype = DType::kFloat32;
  int batch = 0;
  int num_q_heads = 0;  // a multiple of the cache's num_kv_heads
  ConstBuffer block_table;  // int32 [batch, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  // int32 [batch]; seq_lens[b] <= max_blocks_per_seq * block_size. Counts the
  // cached tokens of sequence b including its q_len_b query tokens.
  ConstBuffer seq_lens;
  float softmax_scale = 0.0f;  // finite; usually 1/sqrt(head_dim)
  int num_splits = 32;         // vLLM's NUM_KV_SPLITS, 1..1024
  MutableBuffer out;           // [T, num_q_heads, head_dim] of out_dtype
  DType out_dtype = DType::kFloat32;
  MutableBuffer lse;  // optional float32 [T, num_q_heads], natural log, without the sink; empty: not written
  const Codebook* codebook = nullptr;  // Lloyd-Max keys: default vllm_codebook(head_dim, key_bits)
  ConstBuffer rotation;                // optional dense PiT fp32 [D][D]; empty: Hadamard
  bool check_finite = true;            // reject NaN/Inf in the query

  // Multi-token rows (speculative verification, chunked-prefill continuations).
  // Optional int32 [batch + 1]: 0 = query_start_loc[0] <= ... <=
  // query_start_loc[batch] = num_query_rows; q_len_b = query_start_loc[b+1] -
  // query_start_loc[b] in 0..kMaxQueryLen and <= seq_lens[b]. q_len 0 (vLLM's
  // CUDA-graph padding) gives sequence b no row. Empty: one row per sequence.
  ConstBuffer query_start_loc;
  // T, the rows of query / out / lse. With query_start_loc it must equal
  // query_start_loc[batch] (it sizes the buffers before their contents are
  // read); without it, 0 or batch (both mean batch).
  int num_query_rows = 0;
  // Optional float32 [num_q_heads]: one sink logit per query head, in the units
  // of the scaled scores. The softmax denominator gains exp(sinks[h]), the
  // numerator nothing. Finite, |sinks[h]| * log2(e) within float32 (always checked).
  ConstBuffer sinks;
  int sliding_window = 0;  // W > 0: the row at position p attends to p - W + 1 .. p; 0: unlimited
};

// Longest query run of one sequence (vLLM's decode-path limit for
// continuations; longer chunks go through prefill).
inline constexpr int kMaxQueryLen = 128;

// T: the number of query rows a call reads and writes.
inline std::int64_t decode_query_rows(const DecodeArgs& a) {
  const bool multi = a.query_start_loc.data != nullptr || a.query_start_loc.bytes != 0;
  return multi ? a.num_query_rows : a.batch;
}

// Whether a call uses query_start_loc, sinks or a sliding window (backends
// that implement only one token per sequence refuse those calls).
inline bool decode_uses_rows_sinks_or_window(const DecodeArgs& a) {
  return a.query_start_loc.data != nullptr || a.query_start_loc.bytes != 0 || a.sinks.data != nullptr ||
         a.sinks.bytes != 0 || a.sliding_window != 0;
}

// The golden model: scalar, single-threaded. A row that attends to no token
// (seq_len 0, single-token rows only) gives a zero output row and LSE -inf
// (vLLM returns NaN there).
Status decode_reference(const ConstCacheView& cache, const DecodeArgs& args);

// Checks shapes, buffers, block-table entries, seq_lens, query_start_loc and
// sinks before any output byte is written; every backend calls it first.
Status validate_decode(const ConstCacheView& cache, const DecodeArgs& args);

}  // namespace turboquant
