// Encode entry points: host-side checks and the launch.
#include <cstdint>
#include <string>

#include "arg_checks.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {


Status encode_can_implement(const ConstCacheView& cache, const EncodeArgs& a) {
  if (Status s = turboquant::detail::validate_cache(cache); !s.ok()) return s;
  const Format& f = cache.layout.format;
  if (Status s = detail::check_head_dim(f.head_dim, "encode"); !s.ok()) return s;
  if (Status s = turboquant::detail::check_encode_shapes(cache, a); !s.ok()) return s;
  if (f.fp8_keys()) return Status();
  const Codebook* cb = nullptr;
  (void)turboquant::detail::resolve_codebook(f, a.codebook, &cb);  // checked above
  if (const int i = turboquant::detail::first_unsorted_midpoint(*cb); i >= 0) {
    return Status(StatusCode::kUnsupported, "codebook.midpoints[" + std::to_string(i) + "] > midpoints[" +
                                                std::to_string(i + 1) + "]: the CUDA encode needs sorted midpoints");
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
  (void)turboquant::detail::resolve_codebook(cache.layout.format, a.codebook, &cb);  // checked above
  const detail::EncodeParams p{.layout = cache.layout,
                               .cache = cache.data,
                               .keys = a.keys.data,
                               .values = a.values.data,
                               .dtype = a.dtype,
                               .num_tokens = a.num_tokens,
                               .slot_mapping = static_cast<const std::int64_t*>(a.slot_mapping.data),
                               .rotation = static_cast<const float*>(a.rotation.data),
                               .codebook = *cb,
                               .grid = core::make_bucket_grid(*cb)};
  TQ_CUDA_TRY(detail::launch_encode(p, static_cast<cudaStream_t>(stream)));
  return Status();
}

}  // namespace turboquant::cuda
