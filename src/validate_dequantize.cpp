// Argument validation of dequantize_reference / dequantize_sequences_reference
// and the CUDA dequantize (docs/RELIABILITY.md §1.2): every check names the
// argument and the offending value; nothing is written before all pass.
#include <cstdint>
#include <cstring>
#include <string>

#include "turboquant/detail/validate.hpp"
#include "turboquant/detail/validate_dequantize.hpp"

namespace turboquant {
namespace detail {
namespace {

using std::to_string;

Status invalid(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }
Status out_of_range(const std::string& msg) { return Status(StatusCode::kOutOfRange, msg); }

template <class T>
T element(ConstBuffer b, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(b.data) + sizeof(T) * i, sizeof(T));
  return v;
}

Status check_out_dtype(DType t) {
  if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) {
    return invalid("out_dtype = " + to_string(static_cast<int>(t)) + " is not float32, float16 or bfloat16");
  }
  return Status();
}

Status check_basis(Basis b) {
  if (b != Basis::kOriginal && b != Basis::kRotated) {
    return invalid("basis = " + to_string(static_cast<int>(b)) + " is not kOriginal or kRotated");
  }
  return Status();
}

// keys and values, both `shape` of out_dtype.
Status check_outputs(MutableBuffer keys, MutableBuffer values, std::initializer_list<std::int64_t> dims, DType t) {
  if (Status s = check_buffer("keys", keys.data, keys.bytes, {dims, dtype_size(t), dtype_name(t)}); !s.ok()) return s;
  return check_buffer("values", values.data, values.bytes, {dims, dtype_size(t), dtype_name(t)});
}

}  // namespace

Status check_dequantize_shapes(const ConstCacheView& cache, const DequantizeArgs& a) {
  if (Status s = validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  if (a.num_slots < 0) return invalid("num_slots = " + to_string(a.num_slots) + ": must be >= 0");
  if (Status s = check_out_dtype(a.out_dtype); !s.ok()) return s;
  // Bound num_slots first (finding F4), so that no byte count below can wrap.
  if (a.num_slots > INT64_MAX / (std::int64_t{l.num_kv_heads} * l.format.head_dim * 4)) {
    return out_of_range("num_slots = " + to_string(a.num_slots) + ": its K/V need more than 2^63 bytes");
  }
  if (Status s = check_basis(a.basis); !s.ok()) return s;
  if (Status s = check_buffer("slots", a.slots.data, a.slots.bytes, {{a.num_slots}, 8, "int64"}); !s.ok()) return s;
  if (Status s = check_outputs(a.keys, a.values, {a.num_slots, l.num_kv_heads, l.format.head_dim}, a.out_dtype);
      !s.ok())
    return s;
  return check_tables_shape(l.format, a.codebook, a.rotation);
}

Status check_dequantize_slots(const ConstCacheView& cache, const DequantizeArgs& a) {
  core::Rotation rotation;
  if (Status s = resolve_rotation(cache.layout.format, a.rotation, &rotation); !s.ok()) return s;
  const std::int64_t num_slots = cache.num_blocks * cache.layout.block_size;
  for (std::int64_t i = 0; i < a.num_slots; ++i) {
    const auto slot = element<std::int64_t>(a.slots, i);
    if (slot < 0 || slot >= num_slots) {
      return out_of_range("slots[" + to_string(i) + "] = " + to_string(slot) + " is outside [0, " +
                          to_string(num_slots) + ") (num_blocks x block_size)");
    }
  }
  return Status();
}

Status check_dequantize_sequences_shapes(const ConstCacheView& cache, const DequantizeSequencesArgs& a) {
  if (Status s = validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  if (a.batch < 0) return invalid("batch = " + to_string(a.batch) + ": must be >= 0");
  if (a.max_blocks_per_seq < 0) {
    return invalid("max_blocks_per_seq = " + to_string(a.max_blocks_per_seq) + ": must be >= 0");
  }
  if (a.max_seq < 0) return invalid("max_seq = " + to_string(a.max_seq) + ": must be >= 0");
  if (Status s = check_out_dtype(a.out_dtype); !s.ok()) return s;
  if (Status s = check_basis(a.basis); !s.ok()) return s;
  if (Status s = check_buffer("seq_lens", a.seq_lens.data, a.seq_lens.bytes, {{a.batch}, 4, "int32"}); !s.ok()) {
    return s;
  }
  if (Status s = check_buffer("block_table", a.block_table.data, a.block_table.bytes,
                              {{a.batch, a.max_blocks_per_seq}, 4, "int32"});
      !s.ok())
    return s;
  if (Status s = check_outputs(a.keys, a.values, {a.batch, l.num_kv_heads, a.max_seq, l.format.head_dim}, a.out_dtype);
      !s.ok())
    return s;
  return check_tables_shape(l.format, a.codebook, a.rotation);
}

Status check_dequantize_sequences_tables(const ConstCacheView& cache, const DequantizeSequencesArgs& a) {
  const BlockLayout& l = cache.layout;
  core::Rotation rotation;
  if (Status s = resolve_rotation(l.format, a.rotation, &rotation); !s.ok()) return s;
  for (int b = 0; b < a.batch; ++b) {
    const auto len = element<std::int32_t>(a.seq_lens, b);
    if (len < 0) return invalid("seq_lens[" + to_string(b) + "] = " + to_string(len) + ": must be >= 0");
    if (len > a.max_seq) {
      return out_of_range("seq_lens[" + to_string(b) + "] = " + to_string(len) + " exceeds max_seq = " +
                          to_string(a.max_seq) + " (the outputs' third dimension)");
    }
    const std::int64_t blocks_needed = (std::int64_t{len} + l.block_size - 1) / l.block_size;
    if (blocks_needed > a.max_blocks_per_seq) {
      return out_of_range("seq_lens[" + to_string(b) + "] = " + to_string(len) + " needs " + to_string(blocks_needed) +
                          " blocks of " + to_string(l.block_size) + " tokens but block_table has " +
                          to_string(a.max_blocks_per_seq) + " per row");
    }
    for (std::int64_t j = 0; j < blocks_needed; ++j) {
      const auto blk = element<std::int32_t>(a.block_table, std::int64_t{b} * a.max_blocks_per_seq + j);
      if (blk < 0 || blk >= cache.num_blocks) {
        return out_of_range("block_table[" + to_string(b) + "][" + to_string(j) + "] = " + to_string(blk) +
                            " is outside [0, " + to_string(cache.num_blocks) + ") (num_blocks)");
      }
    }
  }
  return Status();
}

}  // namespace detail

Status validate_dequantize(const ConstCacheView& cache, const DequantizeArgs& args) {
  if (Status s = detail::check_dequantize_shapes(cache, args); !s.ok()) return s;
  return detail::check_dequantize_slots(cache, args);
}

Status validate_dequantize_sequences(const ConstCacheView& cache, const DequantizeSequencesArgs& args) {
  if (Status s = detail::check_dequantize_sequences_shapes(cache, args); !s.ok()) return s;
  return detail::check_dequantize_sequences_tables(cache, args);
}

}  // namespace turboquant
