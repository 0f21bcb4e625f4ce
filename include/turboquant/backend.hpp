// Every backend of the build behind one interface, and the registry that lists
// them. Tools (tq), the cross-backend tests and language bindings iterate
// backends() instead of keeping their own lists; a backend that cannot run
// here is still listed, with the reason.
//
//   cpu-ref      the golden model (scalar, single-threaded)
//   cpu:scalar   the fast CPU backend (turboquant/cpu.hpp), one per SIMD
//   cpu:avx2     instruction set: the golden model's bits, oneTBB threads
//   cpu:avx512
//   cuda:strict  the CUDA kernels bit-exact with the golden model
//   cuda:fast    the CUDA tensor-core decode (turboquant/cuda.hpp, kFast)
//
// Every entry point takes HOST buffers (the CUDA backends copy to the device
// and back, synchronously: turboquant::cuda's *_from_host wrappers). Backends
// are stateless and thread-safe; the registry lives for the whole program.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/status.hpp"

namespace turboquant {

// Per-call options. A backend ignores those it has no use for (see threaded()).
struct BackendOptions {
  // Worker threads of a threaded() backend, as CpuOptions::threads: 0 = every
  // thread of the caller's tbb::task_arena, N > 0 = a private arena of N.
  // Must be >= 0 for every backend.
  int threads = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The registry name ("cpu:avx2"): stable, what find_backend() takes.
  virtual std::string_view name() const = 0;
  // One sentence: what runs and what it guarantees.
  virtual std::string_view description() const = 0;
  // ok when the backend runs in this process; else kBackendUnavailable and
  // the reason ("this CPU has no AVX-512 ...", "no CUDA device: ...",
  // "not built with CUDA ...").
  virtual Status status() const = 0;
  bool available() const { return status().ok(); }
  // Empty when available.
  std::string unavailable_reason() const;

  // Whether decode() reproduces decode_reference's bits (out and LSE). Every
  // backend's encode() writes encode_reference's bytes and every dequantize()
  // it supports returns dequantize_reference's floats, so only decode varies.
  virtual bool exact_decode() const = 0;
  // Whether BackendOptions::threads sets its parallelism.
  virtual bool threaded() const { return false; }

  // Whether a call with these arguments can run here: ok; kBackendUnavailable
  // (status()); kInvalidArgument for bad options; kUnsupported for arguments
  // this backend does not handle (e.g. a head_dim without CUDA kernels, or an
  // operation it lacks). It may also report what is wrong with the arguments
  // themselves, but is not a full validation: decode() / encode() /
  // dequantize() validate them and return the golden model's errors.
  Status supports(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& options = {}) const;
  Status supports(const ConstCacheView& cache, const EncodeArgs& args, const BackendOptions& options = {}) const;
  Status supports(const ConstCacheView& cache, const DequantizeArgs& args,
                  const BackendOptions& options = {}) const;

  // The library calls (decode.hpp, encode.hpp, dequantize.hpp) on this backend:
  // the same arguments, results and errors; nothing is written on error.
  Status decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& options = {}) const;
  Status encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions& options = {}) const;
  Status dequantize(const ConstCacheView& cache, const DequantizeArgs& args,
                    const BackendOptions& options = {}) const;

 protected:
  // Called by the public functions above once the options are valid and the
  // backend is available.
  virtual Status can_decode(const ConstCacheView& cache, const DecodeArgs& args) const = 0;
  virtual Status can_encode(const ConstCacheView& cache, const EncodeArgs& args) const = 0;
  virtual Status can_dequantize(const ConstCacheView& cache, const DequantizeArgs& args) const = 0;
  virtual Status run_decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& o) const = 0;
  virtual Status run_encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions& o) const = 0;
  virtual Status run_dequantize(const ConstCacheView& cache, const DequantizeArgs& args,
                                const BackendOptions& o) const = 0;
};

// Every backend of this build, unavailable ones included, in the order of the
// table above.
const std::vector<const Backend*>& backends();
// The backend named `name`, or nullptr.
const Backend* find_backend(std::string_view name);
// "cpu-ref, cpu:scalar, ..." (for messages).
std::string backend_names();

}  // namespace turboquant
