// The private interface between the CPU backend's driver (decode_cpu.cpp,
// encode_cpu.cpp: validation, TBB tasks, workspace) and its per-ISA kernels
// (isa_*.cpp, each compiled with its own -m flags). Plain data and function
// pointers only: no xsimd, no TBB, no std containers, so the same header is
// safe to include from every ISA's translation unit.
#pragma once

#include <cstdint>

#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/codebook.hpp"
#include "turboquant/core/dtype.hpp"
#include "turboquant/core/partial_layout.hpp"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/rotation.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cpu {

// One decode call, after validation. Work item (b, h, s) = query row b, KV
// head h, split s of its attended range (token_range: docs/ARITHMETIC.md §7);
// it serves the `group` query heads h*group .. h*group+group-1 from one pass
// over its bytes. With one row per sequence and no window, row b is sequence b
// and its range core::split_range(seq_lens[b], num_splits, s). A rows item
// (r0, r1, h, s) does the items (b, h, s) of the consecutive rows r0 <= b < r1
// of one sequence from one pass over the union of their ranges.
struct DecodeProblem {
  const std::uint8_t* cache = nullptr;
  core::BlockLayout layout;
  const std::int32_t* block_table = nullptr;  // [batch][max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  const std::int32_t* seq_lens = nullptr;     // [rows]: tokens row b attends to (seq_lens[b] for one row per sequence)
  const std::int32_t* row_begin = nullptr;    // [rows]: its first attended token; null: 0
  const std::int32_t* row_sequence = nullptr;  // [rows]: its sequence (block-table row); null: b
  const float* sink_logits = nullptr;          // [num_q_heads]: core::sink_logit of each sink; null: no sinks
  int num_splits = 1;
  int num_q_heads = 0;
  int group = 1;
  const float* queries = nullptr;  // [batch][num_q_heads][head_dim]: rotated, times softmax_scale*log2(e)
  const core::Codebook* codebook = nullptr;  // Lloyd-Max keys only
  // Partials of the sequences being processed (rows from sequence
  // first_row_batch on), laid out by core::PartialLayout; every accumulator
  // starts 64-byte aligned when `partial_acc` is.
  core::PartialLayout partials;
  float* partial_acc = nullptr;
  float* partial_ml = nullptr;
  int first_row_batch = 0;  // `queries` and the partials start at sequence first_row_batch

  int head_dim() const { return layout.format.head_dim; }
  std::int64_t row(int b, int q_head) const { return std::int64_t{b - first_row_batch} * num_q_heads + q_head; }
  // acc[head_dim] (unnormalized) and (max, sum) of query head q_head, split s.
  float* acc(int b, int q_head, int s) const { return partial_acc + partials.acc_offset(row(b, q_head), s); }
  float* max_sum(int b, int q_head, int s) const { return partial_ml + partials.ml_offset(row(b, q_head), s); }
  const float* query(int b, int q_head) const { return queries + row(b, q_head) * head_dim(); }
  const std::int32_t* block_row(int b) const {
    return block_table + std::int64_t{row_sequence != nullptr ? row_sequence[b] : b} * max_blocks_per_seq;
  }
  core::TokenRange token_range(int b, int s) const {
    const int begin = row_begin != nullptr ? row_begin[b] : 0;
    return core::row_split_range(core::TokenRange{begin, begin + seq_lens[b]}, num_splits, s);
  }
};

// The CPU's accumulator pitch: 16 floats of padding keep the accumulators of
// neighbouring rows off the same 4 KiB offsets (and 64-byte aligned).
inline int partial_acc_pitch(int head_dim) { return head_dim + 16; }

// Splits of a sequence that hold tokens (a prefix of the split plan).
inline int used_splits(int seq_len, int num_splits) {
  return seq_len == 0 ? 0 : static_cast<int>((seq_len + core::split_len(seq_len, num_splits) - 1) /
                                             core::split_len(seq_len, num_splits));
}

// Floats of per-task scratch a decode work item needs (any ISA).
inline std::int64_t decode_scratch_floats(int group) {
  return std::int64_t{group} * (16 * 16 + 3 * 16) + 2 * 16 * 16 + core::kMaxHeadDim + 64;
}

// Rows items: at most kMaxItemRows rows (kMaxQueryLen, the longest q_len);
// the rows advance after every kRowsChunk decoded tokens, which a ring of
// kRowsRing tokens holds with the chunk before (decode_rows.hpp).
inline constexpr int kMaxItemRows = 128;
inline constexpr int kRowsChunk = 16;
inline constexpr int kRowsRing = 2 * kRowsChunk;

// Floats of per-task scratch a rows item needs (any ISA).
inline std::int64_t decode_rows_scratch_floats(int group, int head_dim) {
  return std::int64_t{2 * kRowsRing} * head_dim + kRowsRing + std::int64_t{2 * kMaxItemRows} * group +
         decode_scratch_floats(group);
}

// One encode call, after validation.
struct EncodeProblem {
  std::uint8_t* cache = nullptr;
  core::BlockLayout layout;
  const void* keys = nullptr;    // [num_tokens][num_kv_heads][head_dim] of dtype
  const void* values = nullptr;  // same
  core::DType dtype = core::DType::kFloat32;
  const void* slot_mapping = nullptr;  // int64 [num_tokens], possibly unaligned
  const core::Codebook* codebook = nullptr;
  bool midpoints_sorted = true;  // bucketize may binary-search (same result as counting)
  core::Rotation rotation;
};

struct IsaKernels {
  const char* name;  // "scalar", "avx2", "avx512"
  // Computes the partials of work item (b, h, s); does nothing for an empty split.
  void (*decode_item)(const DecodeProblem& p, int b, int h, int s, float* scratch);
  // decode_item(p, b, h, s) for the rows r0 <= b < r1 of one sequence (at
  // most kMaxItemRows), the same bits, with one read of their tokens.
  void (*decode_rows)(const DecodeProblem& p, int r0, int r1, int h, int s, float* scratch);
  // Merges the splits of (b, q_head) into out_row[head_dim] (fp32) and *lse.
  void (*merge_row)(const DecodeProblem& p, int b, int q_head, float* out_row, float* lse);
  // Stores tokens [begin, end) (all KV heads each).
  void (*encode_tokens)(const EncodeProblem& p, std::int64_t begin, std::int64_t end);
};

// Scalar steps the SIMD kernels fall back to for rare inputs (NaN scores, FP8
// NaN codes, non-finite K/V). Compiled with baseline flags in scalar_kernels.cpp
// so that no ISA translation unit emits its own copy of an inline core function.
namespace fallback {
float exp2(float x);
float log2(float x);
float fold_tile(core::SoftmaxState& state, const float* scores, int n, float* probs);
void decode_fp8(core::Fp8Format f, const std::uint8_t* bytes, int dims, float* out);
void encode_fp8(core::Fp8Format f, const float* k, int dims, std::uint8_t* out);
core::ValueRange value_range(const float* v, int dims);
void encode_token_head(const EncodeProblem& p, std::uint8_t* block, int t, int h, const float* k, const float* v);
}  // namespace fallback

}  // namespace turboquant::cpu
