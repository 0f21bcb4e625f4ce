// encode_cpu: validation, then tokens in parallel (every token-head writes
// only its own slot's bytes, so the order does not matter).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <new>

#include "parallel.hpp"
#include "simd/dispatch.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {

Status encode_cpu(const CacheView& cache, const EncodeArgs& a, const CpuOptions& options) {
  const cpu::IsaKernels* k = nullptr;
  if (Status s = cpu::start_call(options, validate_encode(cache, a), &k); !s.ok()) return s;
  if (a.num_tokens == 0) return Status();

  cpu::EncodeProblem p;
  p.cache = cache.data;
  p.layout = cache.layout;
  p.keys = a.keys.data;
  p.values = a.values.data;
  p.dtype = a.dtype;
  p.slot_mapping = a.slot_mapping.data;
  (void)detail::resolve_codebook(cache.layout.format, a.codebook, &p.codebook);  // validated above
  (void)detail::resolve_rotation(cache.layout.format, a.rotation, &p.rotation);
  for (int i = 0; i + 2 < p.codebook->size(); ++i) {
    if (!(p.codebook->midpoints[i] <= p.codebook->midpoints[i + 1])) p.midpoints_sorted = false;
  }

  // About 64 token-heads per task.
  const std::int64_t grain = std::max<std::int64_t>(1, 64 / cache.layout.num_kv_heads);
  return cpu::run_in_arena(options.threads, "task state", [&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, a.num_tokens, grain),
                      [&](const tbb::blocked_range<std::int64_t>& r) { k->encode_tokens(p, r.begin(), r.end()); });
  });
}

}  // namespace turboquant
