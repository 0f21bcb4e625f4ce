// Shared argument checks (every backend validates with these before running).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "turboquant/core/rotation.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/encode.hpp"

namespace turboquant::detail {

// A tensor argument: its shape (element counts) and element type. Only used
// as a temporary within one full expression (it holds an initializer_list).
struct TensorShape {
  std::initializer_list<std::int64_t> dims;
  std::size_t element_bytes;
  const char* type;

  std::string to_string() const;  // "[2, 4, 64] float32"
  // Bytes needed, or false when the product exceeds 2^63 (user integers must
  // never overflow: a wrapped size would let a small buffer pass).
  bool bytes(std::int64_t* out) const;
};

// A buffer named `name` (`bytes` long, at `data`) that must hold `shape`:
// kOutOfRange when the size overflows, kBufferTooSmall when null or short.
Status check_buffer(const char* name, const void* data, std::size_t bytes, const TensorShape& shape);

// The codebook a call uses: the caller's (checked against the format) or vLLM's.
Status resolve_codebook(const Format& format, const Codebook* user, const Codebook** out);
// The rotation's shape only: empty, or a [head_dim, head_dim] float32 buffer
// (never for FP8 keys). Reads no element.
Status check_rotation_shape(const Format& format, ConstBuffer pit);
// The rotation a call uses: Hadamard when `pit` is empty, else a checked
// (shape and finite elements) dense matrix.
Status resolve_rotation(const Format& format, ConstBuffer pit, core::Rotation* out);
// Both tables a call uses, resolved and checked together.
struct Tables {
  const Codebook* codebook = nullptr;
  core::Rotation rotation;
};
Status resolve_tables(const Format& format, const Codebook* user_codebook, ConstBuffer pit, Tables* out);
// Shapes and buffers of a cache view.
Status validate_cache(const ConstCacheView& cache);

// validate_decode / validate_encode in two halves, so that a backend whose
// buffers the host cannot read (CUDA) runs the first half and trusts, or copies
// back for, the second.
//
// Shape checks: the argument structs, buffer sizes, null pointers and the
// (host) codebook; they read no byte behind a buffer pointer. Every backend's
// can_implement is built from them.
// The codebook fits the format and the rotation has its shape (resolve_codebook,
// check_rotation_shape).
Status check_tables_shape(const Format& format, const Codebook* codebook, ConstBuffer rotation);
// The scalar arguments of a decode (batch, heads, splits, softmax scale,
// sliding_window >= 0, num_query_rows against batch).
Status check_decode_scalars(const BlockLayout& layout, const DecodeArgs& args);
// The decode's buffers (query, out, lse, seq_lens, block_table, rotation) hold
// their shapes, and the codebook fits the format.
Status check_decode_buffers(const BlockLayout& layout, const DecodeArgs& args);
// validate_cache + check_decode_scalars + check_decode_buffers.
Status check_decode_shapes(const ConstCacheView& cache, const DecodeArgs& args);
// validate_cache, num_tokens, keys / values / slot_mapping sizes, codebook, rotation shape.
Status check_encode_shapes(const ConstCacheView& cache, const EncodeArgs& args);
//
// Table checks: what needs the buffers' contents (host memory): rotation
// finiteness, seq_lens and block_table ranges, query_start_loc (starts at 0,
// non-decreasing, ends at num_query_rows, q_len <= 128 and <= seq_len), sinks
// (finite), slot_mapping ranges and
// duplicates, query / K / V finiteness (when check_finite). They assume the
// matching shape check passed.
Status check_decode_tables(const ConstCacheView& cache, const DecodeArgs& args);
Status check_encode_tables(const ConstCacheView& cache, const EncodeArgs& args);

// The first i with midpoints[i] > midpoints[i + 1], or -1 when the codebook's
// midpoints are sorted (a binary-search bucketize relies on it).
int first_unsorted_midpoint(const Codebook& codebook);

}  // namespace turboquant::detail
