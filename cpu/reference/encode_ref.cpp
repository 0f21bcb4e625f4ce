// The golden encode (vLLM's store): one token-head at a time, in token order.
#include <cstring>

#include "turboquant/core/token_codec.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/validate.hpp"
#include "turboquant/encode.hpp"

namespace turboquant {

Status encode_reference(const CacheView& cache, const EncodeArgs& a) {
  if (Status s = validate_encode(cache, a); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  detail::Tables tables;
  (void)detail::resolve_tables(l.format, a.codebook, a.rotation, &tables);  // validated above
  const Codebook* cb = tables.codebook;
  const core::Rotation rot = tables.rotation;
  float k[core::kMaxHeadDim];
  float v[core::kMaxHeadDim];
  for (std::int64_t i = 0; i < a.num_tokens; ++i) {
    std::int64_t slot;
    std::memcpy(&slot, static_cast<const char*>(a.slot_mapping.data) + 8 * i, 8);
    if (slot < 0) continue;  // vLLM's padding convention
    std::uint8_t* block = cache.data + l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      const std::int64_t first = (i * l.num_kv_heads + h) * dims;
      detail::load_row(a.keys.data, a.dtype, first, dims, k);
      detail::load_row(a.values.data, a.dtype, first, dims, v);
      core::encode_token_head(l, block, t, h, k, v, *cb, rot);
    }
  }
  return Status();
}

}  // namespace turboquant
