// Shared argument checks (every backend validates with these before running).
#pragma once

#include "turboquant/core/rotation.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/encode.hpp"

namespace turboquant::detail {

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
