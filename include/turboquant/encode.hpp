// Encode (vLLM's "store"): raw K and V for N tokens x Hk heads -> the cache
// slots named by a slot mapping. Writes exactly those slots' key bytes, value
// bytes and metadata fields; every other byte of the cache is left untouched.
#pragma once

#include <cstdint>

#include "turboquant/cache_view.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant {

struct EncodeArgs {
  ConstBuffer keys;    // [num_tokens, Hk, head_dim] of `dtype`, contiguous
  ConstBuffer values;  // [num_tokens, Hk, head_dim] of `dtype`, contiguous
  DType dtype = DType::kFloat32;
  std::int64_t num_tokens = 0;
  // int64 [num_tokens]: slot = block * block_size + offset. Negative slots are
  // skipped (vLLM's padding convention); two tokens may not share a slot.
  ConstBuffer slot_mapping;
  const Codebook* codebook = nullptr;  // Lloyd-Max keys: default vllm_codebook(head_dim, key_bits)
  ConstBuffer rotation;                // optional dense PiT fp32 [D][D]; empty: Hadamard
  bool check_finite = true;            // reject NaN/Inf in K/V (naming token, head, dim)
};

// The golden model: scalar, single-threaded.
Status encode_reference(const CacheView& cache, const EncodeArgs& args);

// Checks everything encode needs before a single byte is written.
Status validate_encode(const ConstCacheView& cache, const EncodeArgs& args);

}  // namespace turboquant
