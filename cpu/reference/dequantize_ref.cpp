// Cache slots -> K and V, in the rotated (as stored) or original basis: by a
// list of slots, or per sequence through a block table. Each token-head is
// core::dequantize_token_head (the formula the CUDA kernel runs too).
#include <cstring>

#include "turboquant/core/dequantize_token.hpp"
#include "turboquant/core/elements.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/detail/validate.hpp"
#include "turboquant/detail/validate_dequantize.hpp"

namespace turboquant {
namespace {

// Dequantizes (slot, every head) into rows out_row(h) of keys and values.
template <class OutRow>
void dequantize_slot(const ConstCacheView& cache, const detail::Tables& tables, bool original, std::int64_t slot,
                     void* keys, void* values, DType out, OutRow out_row) {
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  const std::uint8_t* block = cache.data + l.block_base(slot / l.block_size);
  const int t = static_cast<int>(slot % l.block_size);
  float k[core::kMaxHeadDim], v[core::kMaxHeadDim], scratch[core::kMaxHeadDim];
  for (int h = 0; h < l.num_kv_heads; ++h) {
    core::dequantize_token_head(l, block, t, h, *tables.codebook, tables.rotation, original, k, v, scratch);
    const std::int64_t first = out_row(h) * dims;
    for (int d = 0; d < dims; ++d) {
      core::store_element(keys, out, first + d, k[d]);
      core::store_element(values, out, first + d, v[d]);
    }
  }
}

}  // namespace

Status dequantize_reference(const ConstCacheView& cache, const DequantizeArgs& a) {
  if (Status s = validate_dequantize(cache, a); !s.ok()) return s;
  detail::Tables tables;
  if (Status s = detail::resolve_tables(cache.layout.format, a.codebook, a.rotation, &tables); !s.ok()) return s;
  const int heads = cache.layout.num_kv_heads;
  for (std::int64_t i = 0; i < a.num_slots; ++i) {
    std::int64_t slot;
    std::memcpy(&slot, static_cast<const char*>(a.slots.data) + 8 * i, 8);
    dequantize_slot(cache, tables, a.basis == Basis::kOriginal, slot, a.keys.data, a.values.data, a.out_dtype,
                    [&](int h) { return i * heads + h; });
  }
  return Status();
}

Status dequantize_sequences_reference(const ConstCacheView& cache, const DequantizeSequencesArgs& a) {
  if (Status s = validate_dequantize_sequences(cache, a); !s.ok()) return s;
  detail::Tables tables;
  if (Status s = detail::resolve_tables(cache.layout.format, a.codebook, a.rotation, &tables); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  for (int b = 0; b < a.batch; ++b) {
    std::int32_t len;
    std::memcpy(&len, static_cast<const char*>(a.seq_lens.data) + 4 * b, 4);
    for (int j = 0; j < len; ++j) {
      std::int32_t blk;
      std::memcpy(&blk, static_cast<const char*>(a.block_table.data) +
                            4 * (std::int64_t{b} * a.max_blocks_per_seq + j / l.block_size), 4);
      const std::int64_t slot = std::int64_t{blk} * l.block_size + j % l.block_size;
      dequantize_slot(cache, tables, a.basis == Basis::kOriginal, slot, a.keys.data, a.values.data, a.out_dtype,
                      [&](int h) { return (std::int64_t{b} * l.num_kv_heads + h) * a.max_seq + j; });
    }
  }
  return Status();
}

}  // namespace turboquant
