// Encode entry points: host-side checks and the launch.
#include <cstdint>
#include <string>

#include "arg_checks.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {

using turboquant::detail::check_buffer;
using detail::invalid_argument;

Status encode_can_implement(const ConstCacheView& cache, const EncodeArgs& a) {
  if (Status s = turboquant::detail::validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  if (!detail::decode_head_dim_supported(dims)) {
    return Status(StatusCode::kUnsupported, "head_dim = " + std::to_string(dims) + ": the CUDA encode supports 64, 128 and 256");
  }
  if (a.num_tokens < 0) return invalid_argument("num_tokens = " + std::to_string(a.num_tokens) + ": must be >= 0");
  if (Status s = check_buffer("keys", a.keys.data, a.keys.bytes,
                              {{a.num_tokens, l.num_kv_heads, dims}, dtype_size(a.dtype), dtype_name(a.dtype)});
      !s.ok())
    return s;
  if (Status s = check_buffer("values", a.values.data, a.values.bytes,
                              {{a.num_tokens, l.num_kv_heads, dims}, dtype_size(a.dtype), dtype_name(a.dtype)});
      !s.ok())
    return s;
  if (Status s = check_buffer("slot_mapping", a.slot_mapping.data, a.slot_mapping.bytes, {{a.num_tokens}, 8, "int64"});
      !s.ok())
    return s;
  const Codebook* cb = nullptr;
  if (Status s = turboquant::detail::resolve_codebook(l.format, a.codebook, &cb); !s.ok()) return s;
  if (!l.format.fp8_keys()) {
    for (int i = 0; i + 2 < cb->size(); ++i) {
      if (!(cb->midpoints[i] <= cb->midpoints[i + 1])) {
        return Status(StatusCode::kUnsupported, "codebook.midpoints[" + std::to_string(i) + "] > midpoints[" +
                                                    std::to_string(i + 1) + "]: the CUDA encode needs sorted midpoints");
      }
    }
  }
  if (a.rotation.data != nullptr || a.rotation.bytes != 0) {
    if (l.format.fp8_keys()) return invalid_argument("rotation given, but FP8 keys are not rotated");
    if (Status s = check_buffer("rotation", a.rotation.data, a.rotation.bytes, {{dims, dims}, 4, "float32"});
        !s.ok())
      return s;
  }
  return Status();
}

Status encode(const CacheView& cache, const EncodeArgs& a, void* stream) {
  if (Status s = encode_can_implement(cache, a); !s.ok()) return s;
  if (a.num_tokens == 0) return Status();
  if (Status s = detail::check_device_pointers({{"cache.data", cache.data},
                                                {"keys", a.keys.data},
                                                {"values", a.values.data},
                                                {"slot_mapping", a.slot_mapping.data},
                                                {"rotation", a.rotation.data}});
      !s.ok())
    return s;
  const Codebook* cb = nullptr;
  (void)turboquant::detail::resolve_codebook(cache.layout.format, a.codebook, &cb);
  detail::EncodeParams p;
  p.layout = cache.layout;
  p.cache = cache.data;
  p.keys = a.keys.data;
  p.values = a.values.data;
  p.dtype = a.dtype;
  p.num_tokens = a.num_tokens;
  p.slot_mapping = static_cast<const std::int64_t*>(a.slot_mapping.data);
  p.rotation = static_cast<const float*>(a.rotation.data);
  p.codebook = *cb;
  p.grid = core::make_bucket_grid(*cb);
  TQ_CUDA_TRY(detail::launch_encode(p, static_cast<cudaStream_t>(stream)));
  return Status();
}

}  // namespace turboquant::cuda
