// Dequantize cache slots back to fp32 K and V (for inspection, validation, and
// vLLM's continuation-prefill path).
#pragma once

#include <cstdint>

#include "turboquant/cache_view.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant {

enum class Basis : std::uint8_t {
  kRotated,   // keys as stored: c[idx] * norm in the rotated basis (FP8 keys: unchanged)
  kOriginal,  // keys rotated back: (c[idx] * norm) @ Pi
};

struct DequantizeArgs {
  ConstBuffer slots;  // int64 [num_slots]; each in [0, num_blocks * block_size)
  std::int64_t num_slots = 0;
  MutableBuffer keys;    // [num_slots, Hk, head_dim] of out_dtype
  MutableBuffer values;  // [num_slots, Hk, head_dim] of out_dtype
  // float32: the contract's values (ARITHMETIC.md §5); float16 / bfloat16: those
  // rounded to nearest even (the fp16 K/V vLLM's continuation prefill feeds to
  // FlashAttention).
  DType out_dtype = DType::kFloat32;
  Basis basis = Basis::kOriginal;
  const Codebook* codebook = nullptr;
  ConstBuffer rotation;
};

// Per sequence through a block table, into the [batch, Hk, max_seq, head_dim]
// layout of vLLM's continuation prefill: position j < seq_lens[b] of sequence b
// (slot block_table[b][j / block_size] * block_size + j % block_size) goes to
// keys[b][h][j] and values[b][h][j]. Rows j >= seq_lens[b] are not written.
struct DequantizeSequencesArgs {
  ConstBuffer block_table;  // int32 [batch, max_blocks_per_seq]
  int batch = 0;
  int max_blocks_per_seq = 0;
  ConstBuffer seq_lens;  // int32 [batch]; each in [0, min(max_seq, max_blocks_per_seq * block_size)]
  int max_seq = 0;       // the outputs' third dimension
  MutableBuffer keys;    // [batch, Hk, max_seq, head_dim] of out_dtype
  MutableBuffer values;  // [batch, Hk, max_seq, head_dim] of out_dtype
  DType out_dtype = DType::kFloat32;
  Basis basis = Basis::kOriginal;
  const Codebook* codebook = nullptr;
  ConstBuffer rotation;
};

// The golden model. Validates first (validate_dequantize*); nothing is written
// on error.
Status dequantize_reference(const ConstCacheView& cache, const DequantizeArgs& args);
Status dequantize_sequences_reference(const ConstCacheView& cache, const DequantizeSequencesArgs& args);

// Every check of the calls above (shapes, buffers, tables, slot / block ids,
// seq_lens) before any output byte is written.
Status validate_dequantize(const ConstCacheView& cache, const DequantizeArgs& args);
Status validate_dequantize_sequences(const ConstCacheView& cache, const DequantizeSequencesArgs& args);

}  // namespace turboquant
