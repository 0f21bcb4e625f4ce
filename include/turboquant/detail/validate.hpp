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
// The rotation a call uses: Hadamard when `pit` is empty, else a checked dense matrix.
Status resolve_rotation(const Format& format, ConstBuffer pit, core::Rotation* out);
// Both tables a call uses, resolved and checked together.
struct Tables {
  const Codebook* codebook = nullptr;
  core::Rotation rotation;
};
Status resolve_tables(const Format& format, const Codebook* user_codebook, ConstBuffer pit, Tables* out);
// Shapes and buffers of a cache view.
Status validate_cache(const ConstCacheView& cache);

}  // namespace turboquant::detail
