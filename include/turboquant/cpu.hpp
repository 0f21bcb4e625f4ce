// The fast CPU backend: SIMD kernels (AVX-512, AVX2, scalar) picked once at run
// time, oneTBB tasks over (sequence, KV head, split) work items. Produces the
// same bits as decode_reference / encode_reference (docs/ARITHMETIC.md) for
// every ISA and every thread count.
#pragma once

#include <string>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/status.hpp"

namespace turboquant {

struct CpuOptions {
  // Worker threads. 0: every thread of the caller's current tbb::task_arena
  // (the whole machine when the caller is not inside one). N > 0: a private
  // arena of N threads (capped by what oneTBB's global limit allows).
  int threads = 0;
  // "scalar", "avx2" or "avx512"; empty: the environment variable
  // TURBOQUANT_ISA if set, else the best ISA this CPU runs.
  std::string isa;
};

// Same arguments and results as decode_reference (decode.hpp). Validates first;
// nothing is written on error. kBackendUnavailable when options.isa (or
// TURBOQUANT_ISA) names an unknown ISA or one this CPU cannot run.
Status decode_cpu(const ConstCacheView& cache, const DecodeArgs& args, const CpuOptions& options = {});

// Same arguments and results as encode_reference (encode.hpp): the same bytes.
Status encode_cpu(const CacheView& cache, const EncodeArgs& args, const CpuOptions& options = {});

// ISAs this CPU can run, lowest first: "scalar", then e.g. "avx2", "avx512".
std::vector<std::string> available_isas();

// The path `options` selects, e.g. "cpu:avx512"; empty when options.isa (or
// TURBOQUANT_ISA) is unknown or not available on this CPU.
std::string cpu_backend_name(const CpuOptions& options = {});

}  // namespace turboquant
