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
  MutableBuffer keys;    // float32 [num_slots, Hk, head_dim]
  MutableBuffer values;  // float32 [num_slots, Hk, head_dim]
  Basis basis = Basis::kOriginal;
  const Codebook* codebook = nullptr;
  ConstBuffer rotation;
};

Status dequantize_reference(const ConstCacheView& cache, const DequantizeArgs& args);

}  // namespace turboquant
