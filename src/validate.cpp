// Argument validation shared by every backend. Each check names the argument
// and the offending value; nothing is written before all checks pass.
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {
namespace detail {

std::string TensorShape::to_string() const {
  std::string out = "[";
  for (std::int64_t d : dims) out += (out.size() > 1 ? ", " : "") + std::to_string(d);
  return out + "] " + type;
}

bool TensorShape::bytes(std::int64_t* out) const {
  std::int64_t total = static_cast<std::int64_t>(element_bytes);
  for (std::int64_t d : dims) {
    if (__builtin_mul_overflow(total, d, &total)) return false;
  }
  *out = total;
  return true;
}

Status check_buffer(const char* name, const void* data, std::size_t bytes, const TensorShape& shape) {
  std::int64_t needed = 0;
  if (!shape.bytes(&needed)) {
    return Status(StatusCode::kOutOfRange, std::string(name) + " " + shape.to_string() + " needs more than 2^63 bytes");
  }
  if (needed == 0) return Status();
  if (data == nullptr) {
    return Status(StatusCode::kBufferTooSmall, std::string(name) + " is null but must hold " + shape.to_string());
  }
  if (bytes < static_cast<std::size_t>(needed)) {
    return Status(StatusCode::kBufferTooSmall, std::string(name) + " has " + std::to_string(bytes) + " bytes but " +
                                                   shape.to_string() + " needs " + std::to_string(needed));
  }
  return Status();
}

}  // namespace detail

namespace {

using detail::check_buffer;
using detail::TensorShape;

using std::to_string;

Status invalid(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }

template <class T>
T load(const ConstBuffer& buf, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf.data) + sizeof(T) * i, sizeof(T));
  return v;
}

// First non-finite element of a [rows, heads, dims] tensor, reported by position.
Status check_finite_tensor(const char* name, const void* data, DType t, std::int64_t rows, int heads, int dims,
                           const char* row_name, std::int64_t first_row = 0) {
  const std::int64_t count = rows * heads * dims;
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = detail::load_element(data, t, i);
    if (!std::isfinite(x)) {
      const std::int64_t row = first_row + i / (std::int64_t{heads} * dims);
      const int head = static_cast<int>(i / dims % heads);
      const int dim = static_cast<int>(i % dims);
      return Status(StatusCode::kNonFinite, std::string(name) + "[" + to_string(row) + "][" + to_string(head) + "][" +
                                                to_string(dim) + "] = " + std::to_string(x) + " is not finite (" +
                                                row_name + " " + to_string(row) + ", head " + to_string(head) +
                                                ", dim " + to_string(dim) + ")");
    }
  }
  return Status();
}

template <class Buffer>
bool given(const Buffer& buf) {
  return buf.data != nullptr || buf.bytes != 0;
}

// query_start_loc (table half): starts at 0, never decreases, ends at
// num_query_rows; each q_len in [0, kMaxQueryLen] and <= seq_lens[b] (the
// query tokens are cached already). Assumes seq_lens passed its own checks.
Status check_query_start_loc(const DecodeArgs& a) {
  const auto at = [&](int b) { return load<std::int32_t>(a.query_start_loc, b); };
  if (at(0) != 0) return invalid("query_start_loc[0] = " + to_string(at(0)) + ": must be 0");
  for (int b = 0; b < a.batch; ++b) {
    const std::int32_t lo = at(b), hi = at(b + 1);
    const std::string entry = "query_start_loc[" + to_string(b + 1) + "] = " + to_string(hi);
    if (hi < lo) {
      return invalid(entry + " < query_start_loc[" + to_string(b) + "] = " + to_string(lo) + ": must not decrease");
    }
    const std::int64_t q_len = std::int64_t{hi} - lo;
    if (q_len > kMaxQueryLen) {
      return invalid(entry + ": q_len of sequence " + to_string(b) + " = " + to_string(q_len) + " exceeds " +
                     to_string(kMaxQueryLen));
    }
    const std::int32_t seq_len = load<std::int32_t>(a.seq_lens, b);
    if (q_len > seq_len) {
      return invalid(entry + ": q_len of sequence " + to_string(b) + " = " + to_string(q_len) + " exceeds seq_lens[" +
                     to_string(b) + "] = " + to_string(seq_len) + " (the query tokens are part of the sequence)");
    }
  }
  if (at(a.batch) != a.num_query_rows) {
    return invalid("query_start_loc[" + to_string(a.batch) + "] = " + to_string(at(a.batch)) +
                   ": must equal num_query_rows = " + to_string(a.num_query_rows));
  }
  return Status();
}

// Sinks: finite, and finite in base 2 (sink * log2(e), core::sink_logit).
Status check_sinks(const DecodeArgs& a) {
  for (int h = 0; h < a.num_q_heads; ++h) {
    const float x = load<float>(a.sinks, h);
    if (!std::isfinite(x) || !std::isfinite(core::sink_logit(x))) {
      const char* why = std::isfinite(x) ? ": sinks * log2(e) overflows float32" : " is not finite";
      return Status(StatusCode::kNonFinite, "sinks[" + to_string(h) + "] = " + std::to_string(x) + why);
    }
  }
  return Status();
}

}  // namespace

namespace detail {

Status resolve_codebook(const Format& format, const Codebook* user, const Codebook** out) {
  static const Codebook kUnused{};
  if (format.fp8_keys()) {
    *out = &kUnused;
    return Status();
  }
  if (user == nullptr) {
    *out = &vllm_codebook(format.head_dim, format.key_bits);
    return Status();
  }
  if (user->bits != format.key_bits) {
    return invalid("codebook has " + to_string(user->bits) + " bits but the format's keys have " +
                   to_string(format.key_bits));
  }
  for (int i = 0; i < user->size(); ++i) {
    if (!std::isfinite(user->centroids[i])) {
      return Status(StatusCode::kNonFinite, "codebook.centroids[" + to_string(i) + "] is not finite");
    }
  }
  *out = user;
  return Status();
}

Status check_rotation_shape(const Format& format, ConstBuffer pit) {
  if (pit.data == nullptr && pit.bytes == 0) return Status();
  if (format.fp8_keys()) return invalid("rotation given, but FP8 keys are not rotated");
  const std::int64_t dims = format.head_dim;
  return check_buffer("rotation", pit.data, pit.bytes, {{dims, dims}, 4, "float32"});
}

Status resolve_rotation(const Format& format, ConstBuffer pit, core::Rotation* out) {
  *out = core::Rotation{};
  if (Status s = check_rotation_shape(format, pit); !s.ok()) return s;
  if (pit.data == nullptr) return Status();
  const std::int64_t dims = format.head_dim;
  const float* m = static_cast<const float*>(pit.data);
  for (std::int64_t i = 0; i < dims * dims; ++i) {
    if (!std::isfinite(m[i])) {
      return Status(StatusCode::kNonFinite,
                    "rotation[" + to_string(i / dims) + "][" + to_string(i % dims) + "] is not finite");
    }
  }
  out->pit = m;
  return Status();
}

Status resolve_tables(const Format& format, const Codebook* user_codebook, ConstBuffer pit, Tables* out) {
  if (Status s = resolve_codebook(format, user_codebook, &out->codebook); !s.ok()) return s;
  return resolve_rotation(format, pit, &out->rotation);
}

Status validate_cache(const ConstCacheView& cache) {
  if (Status s = validate_layout(cache.layout); !s.ok()) return s;
  if (cache.num_blocks < 1) return invalid("cache.num_blocks = " + to_string(cache.num_blocks) + ": must be >= 1");
  if (cache.num_blocks > INT64_MAX / cache.layout.block_bytes()) {
    return Status(StatusCode::kOutOfRange, "cache.num_blocks = " + to_string(cache.num_blocks) + " blocks of " +
                                               to_string(cache.layout.block_bytes()) + " bytes exceed 2^63 bytes");
  }
  if (cache.data == nullptr) return Status(StatusCode::kBufferTooSmall, "cache.data is null");
  return Status();
}

Status check_tables_shape(const Format& format, const Codebook* codebook, ConstBuffer rotation) {
  const Codebook* cb = nullptr;
  if (Status s = resolve_codebook(format, codebook, &cb); !s.ok()) return s;
  return check_rotation_shape(format, rotation);
}

Status check_decode_scalars(const BlockLayout& l, const DecodeArgs& a) {
  if (a.batch < 0) return invalid("batch = " + to_string(a.batch) + ": must be >= 0");
  if (a.num_q_heads < 1) return invalid("num_q_heads = " + to_string(a.num_q_heads) + ": must be >= 1");
  if (a.num_q_heads % l.num_kv_heads != 0) {
    return invalid("num_q_heads = " + to_string(a.num_q_heads) + " is not a multiple of num_kv_heads = " +
                   to_string(l.num_kv_heads));
  }
  if (a.max_blocks_per_seq < 0) {
    return invalid("max_blocks_per_seq = " + to_string(a.max_blocks_per_seq) + ": must be >= 0");
  }
  if (!std::isfinite(a.softmax_scale)) {
    return Status(StatusCode::kNonFinite, "softmax_scale = " + std::to_string(a.softmax_scale) + " is not finite");
  }
  if (a.num_splits < 1 || a.num_splits > 1024) {
    return invalid("num_splits = " + to_string(a.num_splits) + ": must be in [1, 1024]");
  }
  if (a.sliding_window < 0) {
    return invalid("sliding_window = " + to_string(a.sliding_window) + ": must be >= 0 (0: unlimited)");
  }
  if (!given(a.query_start_loc)) {
    if (a.num_query_rows != 0 && a.num_query_rows != a.batch) {
      return invalid("num_query_rows = " + to_string(a.num_query_rows) +
                     " but query_start_loc is empty: must be 0 or batch = " + to_string(a.batch));
    }
  } else if (a.num_query_rows < 0 || std::int64_t{a.num_query_rows} > std::int64_t{a.batch} * kMaxQueryLen) {
    return invalid("num_query_rows = " + to_string(a.num_query_rows) + ": must be in [0, batch x " +
                   to_string(kMaxQueryLen) + " = " + to_string(std::int64_t{a.batch} * kMaxQueryLen) + "]");
  }
  return Status();
}

Status check_decode_buffers(const BlockLayout& l, const DecodeArgs& a) {
  const std::int64_t batch = a.batch, heads = a.num_q_heads, dims = l.format.head_dim;
  const std::int64_t rows = decode_query_rows(a);
  if (Status s = check_buffer("query", a.query.data, a.query.bytes,
                              {{rows, heads, dims}, dtype_size(a.query_dtype), dtype_name(a.query_dtype)});
      !s.ok())
    return s;
  if (Status s = check_buffer("out", a.out.data, a.out.bytes,
                              {{rows, heads, dims}, dtype_size(a.out_dtype), dtype_name(a.out_dtype)});
      !s.ok())
    return s;
  if (given(a.lse)) {
    if (Status s = check_buffer("lse", a.lse.data, a.lse.bytes, {{rows, heads}, 4, "float32"}); !s.ok()) return s;
  }
  if (given(a.query_start_loc)) {
    if (Status s = check_buffer("query_start_loc", a.query_start_loc.data, a.query_start_loc.bytes,
                                {{batch + 1}, 4, "int32"});
        !s.ok())
      return s;
  }
  if (given(a.sinks)) {
    if (Status s = check_buffer("sinks", a.sinks.data, a.sinks.bytes, {{heads}, 4, "float32"}); !s.ok()) return s;
  }
  if (Status s = check_buffer("seq_lens", a.seq_lens.data, a.seq_lens.bytes, {{batch}, 4, "int32"}); !s.ok())
    return s;
  if (Status s = check_buffer("block_table", a.block_table.data, a.block_table.bytes,
                              {{batch, a.max_blocks_per_seq}, 4, "int32"});
      !s.ok())
    return s;
  return check_tables_shape(l.format, a.codebook, a.rotation);
}

Status check_decode_shapes(const ConstCacheView& cache, const DecodeArgs& a) {
  if (Status s = validate_cache(cache); !s.ok()) return s;
  if (Status s = check_decode_scalars(cache.layout, a); !s.ok()) return s;
  return check_decode_buffers(cache.layout, a);
}

Status check_decode_tables(const ConstCacheView& cache, const DecodeArgs& a) {
  const BlockLayout& l = cache.layout;
  core::Rotation rotation;
  if (Status s = resolve_rotation(l.format, a.rotation, &rotation); !s.ok()) return s;
  for (int b = 0; b < a.batch; ++b) {
    const std::int32_t len = load<std::int32_t>(a.seq_lens, b);
    if (len < 0) return invalid("seq_lens[" + to_string(b) + "] = " + to_string(len) + ": must be >= 0");
    if (len > core::kMaxSeqLen) {
      return Status(StatusCode::kOutOfRange, "seq_lens[" + to_string(b) + "] = " + to_string(len) +
                                                 " exceeds the maximum sequence length " + to_string(core::kMaxSeqLen));
    }
    const std::int64_t blocks_needed = (std::int64_t{len} + l.block_size - 1) / l.block_size;
    if (blocks_needed > a.max_blocks_per_seq) {
      return Status(StatusCode::kOutOfRange,
                    "seq_lens[" + to_string(b) + "] = " + to_string(len) + " needs " + to_string(blocks_needed) +
                        " blocks of " + to_string(l.block_size) + " tokens but block_table has " +
                        to_string(a.max_blocks_per_seq) + " per row");
    }
    for (std::int64_t j = 0; j < blocks_needed; ++j) {
      const std::int32_t blk = load<std::int32_t>(a.block_table, std::int64_t{b} * a.max_blocks_per_seq + j);
      if (blk < 0 || blk >= cache.num_blocks) {
        return Status(StatusCode::kOutOfRange, "block_table[" + to_string(b) + "][" + to_string(j) + "] = " +
                                                   to_string(blk) + " is outside [0, " +
                                                   to_string(cache.num_blocks) + ") (num_blocks)");
      }
    }
  }
  if (given(a.query_start_loc)) {
    if (Status s = check_query_start_loc(a); !s.ok()) return s;
  }
  if (given(a.sinks)) {
    if (Status s = check_sinks(a); !s.ok()) return s;
  }
  if (a.check_finite) {
    return check_finite_tensor("query", a.query.data, a.query_dtype, decode_query_rows(a), a.num_q_heads,
                               l.format.head_dim, given(a.query_start_loc) ? "query row" : "sequence");
  }
  return Status();
}

Status check_encode_shapes(const ConstCacheView& cache, const EncodeArgs& a) {
  if (Status s = validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  if (a.num_tokens < 0) return invalid("num_tokens = " + to_string(a.num_tokens) + ": must be >= 0");
  const TensorShape kv_shape{{a.num_tokens, l.num_kv_heads, l.format.head_dim}, dtype_size(a.dtype),
                             dtype_name(a.dtype)};
  if (Status s = check_buffer("keys", a.keys.data, a.keys.bytes, kv_shape); !s.ok()) return s;
  if (Status s = check_buffer("values", a.values.data, a.values.bytes, kv_shape); !s.ok()) return s;
  if (Status s = check_buffer("slot_mapping", a.slot_mapping.data, a.slot_mapping.bytes, {{a.num_tokens}, 8, "int64"});
      !s.ok())
    return s;
  return check_tables_shape(l.format, a.codebook, a.rotation);
}

Status check_encode_tables(const ConstCacheView& cache, const EncodeArgs& a) {
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  core::Rotation rotation;
  if (Status s = resolve_rotation(l.format, a.rotation, &rotation); !s.ok()) return s;
  const std::int64_t num_slots = cache.num_blocks * l.block_size;
  std::vector<std::int64_t> used;
  used.reserve(static_cast<std::size_t>(a.num_tokens));
  for (std::int64_t i = 0; i < a.num_tokens; ++i) {
    const std::int64_t slot = load<std::int64_t>(a.slot_mapping, i);
    if (slot < 0) continue;
    if (slot >= num_slots) {
      return Status(StatusCode::kOutOfRange, "slot_mapping[" + to_string(i) + "] = " + to_string(slot) +
                                                 " is outside [0, " + to_string(num_slots) + ") (num_blocks " +
                                                 to_string(cache.num_blocks) + " x block_size " +
                                                 to_string(l.block_size) + ")");
    }
    used.push_back(slot);
  }
  std::sort(used.begin(), used.end());
  if (auto dup = std::adjacent_find(used.begin(), used.end()); dup != used.end()) {
    return invalid("slot_mapping names slot " + to_string(*dup) + " more than once");
  }
  if (!a.check_finite) return Status();
  // Only tokens that are stored must be finite (skipped rows may be padding).
  const std::int64_t row = std::int64_t{l.num_kv_heads} * dims;
  for (std::int64_t i = 0; i < a.num_tokens; ++i) {
    if (load<std::int64_t>(a.slot_mapping, i) < 0) continue;
    const auto at = [&](const ConstBuffer& buf) {
      return static_cast<const char*>(buf.data) + i * row * dtype_size(a.dtype);
    };
    if (Status s = check_finite_tensor("keys", at(a.keys), a.dtype, 1, l.num_kv_heads, dims, "token", i); !s.ok())
      return s;
    if (Status s = check_finite_tensor("values", at(a.values), a.dtype, 1, l.num_kv_heads, dims, "token", i);
        !s.ok())
      return s;
  }
  return Status();
}

int first_unsorted_midpoint(const Codebook& cb) {
  for (int i = 0; i + 2 < cb.size(); ++i) {
    if (!(cb.midpoints[i] <= cb.midpoints[i + 1])) return i;
  }
  return -1;
}

}  // namespace detail

Status validate_decode(const ConstCacheView& cache, const DecodeArgs& a) {
  if (Status s = detail::check_decode_shapes(cache, a); !s.ok()) return s;
  return detail::check_decode_tables(cache, a);
}

Status validate_encode(const ConstCacheView& cache, const EncodeArgs& a) {
  if (Status s = detail::check_encode_shapes(cache, a); !s.ok()) return s;
  return detail::check_encode_tables(cache, a);
}

}  // namespace turboquant
