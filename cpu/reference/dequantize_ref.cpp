// Cache slots -> fp32 K and V, in the rotated (as stored) or original basis.
#include <climits>
#include <cstring>

#include "turboquant/core/token_codec.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {

Status dequantize_reference(const ConstCacheView& cache, const DequantizeArgs& a) {
  if (Status s = detail::validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  if (a.num_slots < 0) {
    return Status(StatusCode::kInvalidArgument, "num_slots = " + std::to_string(a.num_slots) + ": must be >= 0");
  }
  // Bound num_slots first so that no byte count below can wrap.
  if (a.num_slots > INT64_MAX / (std::int64_t{l.num_kv_heads} * dims * 4)) {
    return Status(StatusCode::kOutOfRange, "num_slots = " + std::to_string(a.num_slots) + ": its K/V need more than 2^63 bytes");
  }
  const std::size_t out_bytes = static_cast<std::size_t>(a.num_slots) * l.num_kv_heads * dims * 4;
  const std::string shape = std::string("[") + std::to_string(a.num_slots) + ", " + std::to_string(l.num_kv_heads) + ", " +
                            std::to_string(dims) + "] float32";
  const struct {
    const char* name;
    const void* data;
    std::size_t bytes, needed;
  } buffers[] = {{"slots", a.slots.data, a.slots.bytes, static_cast<std::size_t>(a.num_slots) * 8},
                 {"keys", a.keys.data, a.keys.bytes, out_bytes},
                 {"values", a.values.data, a.values.bytes, out_bytes}};
  for (const auto& b : buffers) {
    if (b.needed > 0 && (b.data == nullptr || b.bytes < b.needed)) {
      return Status(StatusCode::kBufferTooSmall, std::string(b.name) + " has " + std::to_string(b.bytes) +
                                                     " bytes but needs " + std::to_string(b.needed) +
                                                     (b.name[0] == 's' ? "" : " for " + shape));
    }
  }
  detail::Tables tables;
  if (Status s = detail::resolve_tables(l.format, a.codebook, a.rotation, &tables); !s.ok()) return s;
  const Codebook* cb = tables.codebook;
  const core::Rotation rot = tables.rotation;
  const std::int64_t num_slots = cache.num_blocks * l.block_size;
  for (std::int64_t i = 0; i < a.num_slots; ++i) {
    std::int64_t slot;
    std::memcpy(&slot, static_cast<const char*>(a.slots.data) + 8 * i, 8);
    if (slot < 0 || slot >= num_slots) {
      return Status(StatusCode::kOutOfRange, "slots[" + std::to_string(i) + "] = " + std::to_string(slot) +
                                                 " is outside [0, " + std::to_string(num_slots) + ")");
    }
  }
  float direction[core::kMaxHeadDim];
  for (std::int64_t i = 0; i < a.num_slots; ++i) {
    std::int64_t slot;
    std::memcpy(&slot, static_cast<const char*>(a.slots.data) + 8 * i, 8);
    const std::uint8_t* block = cache.data + l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      float* k = static_cast<float*>(a.keys.data) + (i * l.num_kv_heads + h) * dims;
      float* v = static_cast<float*>(a.values.data) + (i * l.num_kv_heads + h) * dims;
      core::decode_key_direction(l, block, t, h, *cb, direction);
      const float norm = core::decode_key_norm(l, block, t, h, direction);
      if (!l.format.fp8_keys()) {
        for (int d = 0; d < dims; ++d) direction[d] = core::mul_rn(direction[d], norm);
        if (a.basis == Basis::kOriginal) {
          core::rotate_inverse(rot, direction, k, dims);
        } else {
          std::memcpy(k, direction, sizeof(float) * dims);
        }
      } else {
        std::memcpy(k, direction, sizeof(float) * dims);
      }
      core::decode_value(l, block, t, h, v);
    }
  }
  return Status();
}

}  // namespace turboquant
