// The float64 oracle: dense attention in double precision over K/V gathered
// per sequence, either dequantized from the cache bytes (what a kernel should
// compute; its distance to a kernel is kernel error) or the original K/V before
// quantization (its distance to the dequantized oracle is format error).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "turboquant/turboquant.hpp"

namespace turboquant::checks {

// K/V of the attended tokens, sequence by sequence in position order:
// keys/values float32 [T, Hk, D]; sequence sequences[i] owns rows
// [offsets[i], offsets[i + 1]).
struct DenseKV {
  int num_kv_heads = 0;
  int head_dim = 0;
  std::vector<int> sequences;
  std::vector<std::int64_t> offsets;
  std::vector<float> keys, values;
};

// The cache slot of every token of `sequences`, read through the block table
// (entries already validated); offsets as in DenseKV.
std::vector<std::int64_t> sequence_slots(const turboquant::BlockLayout& layout,
                                         std::span<const std::int32_t> block_table, int max_blocks,
                                         std::span<const std::int32_t> seq_lens, const std::vector<int>& sequences,
                                         std::vector<std::int64_t>* offsets);

// Dequantizes `slots` (keys rotated back to the original basis) into *out, in
// parallel; codebook as in DequantizeArgs. Fails with dequantize_reference's Status.
turboquant::Status dequantized_kv(const turboquant::ConstCacheView& cache, const turboquant::Codebook* codebook,
                                  const std::vector<std::int64_t>& slots, const std::vector<int>& sequences,
                                  const std::vector<std::int64_t>& offsets, int threads, DenseKV* out);

// The original K/V [N, Hk, D] of the same tokens, found through slot_mapping
// [N]. False (with the reason) when a token's slot is not in slot_mapping.
bool original_kv(std::span<const std::int64_t> slot_mapping, std::span<const float> keys, std::span<const float> values,
                 int num_kv_heads, int head_dim, const std::vector<std::int64_t>& slots,
                 const std::vector<int>& sequences, const std::vector<std::int64_t>& offsets, DenseKV* out,
                 std::string* why);

// out[i, hq, :] = softmax(scale * q . K^T) V for sequence kv.sequences[i], in
// double; query is float32 [B, Hq, D] (unrotated). An empty sequence gives 0.
std::vector<double> f64_attention(const DenseKV& kv, std::span<const float> query, int num_q_heads, double scale,
                                  int threads);

// The query rows of a decode (ARITHMETIC.md §7): row r reads query row
// query_row[r], belongs to sequence kv.sequences[kv_index[r]] and sits at
// position[r]; it attends to positions [max(0, p + 1 - W), p] (W = 0: [0, p]).
struct QueryRows {
  std::vector<int> kv_index;            // [T], into DenseKV::sequences / offsets
  std::vector<std::int64_t> query_row;  // [T], row of the query [*, Hq, D]
  std::vector<std::int64_t> position;   // [T]; -1: the row attends to nothing (seq_len 0)
};

// One row per sequence of kv at seq_len - 1, query row kv.sequences[i] (what f64_attention computes).
QueryRows last_token_rows(const DenseKV& kv);

// vLLM's rows: query_start_loc int32 [B + 1] (already validated, e.g. by
// decode_reference) over sequences 0..B-1 of kv, whose lengths are kv's.
QueryRows query_start_loc_rows(const DenseKV& kv, std::span<const std::int32_t> query_start_loc);

// out[r, hq, :] for each row of `rows` (float64 [T, Hq, D]): dense softmax
// attention over the row's window; sinks float32 [Hq] (empty: none) add
// exp(sinks[hq]) to the denominator only. A row with no token gives 0.
std::vector<double> f64_attention_rows(const DenseKV& kv, const QueryRows& rows, std::span<const float> query,
                                       int num_q_heads, double scale, std::span<const float> sinks,
                                       int sliding_window, int threads);

// Runs fn(begin, end) over [0, n) on `threads` threads, one contiguous chunk each.
void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace turboquant::checks
