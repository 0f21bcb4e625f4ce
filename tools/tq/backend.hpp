// The backends tq can run, behind one small interface:
//   cpu-ref      the golden model (scalar, single-threaded)
//   cpu          the fast CPU backend (turboquant/cpu.hpp) when this build has
//                one, else the golden model
//   cuda         the CUDA backend's fast (tensor-core) decode, when built and a
//                device is present
//   cuda-strict  the CUDA kernels that reproduce the golden model's bits
// A backend that cannot run here is a ToolError with exit code 3.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "turboquant/turboquant.hpp"

namespace tq {

struct BackendRequest {
  std::string name;  // empty: default_backend_name()
  std::string isa;   // empty: the best this CPU runs (or $TURBOQUANT_ISA)
  int threads = 0;   // 0: all hardware threads
};

// How many timed runs: at least min_runs, more while under min_seconds, at most max_runs.
struct TimingPlan {
  int min_runs = 3;
  int max_runs = 15;
  double min_seconds = 1.0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // What runs, e.g. "cpu-ref", "cpu:avx2", "cuda:fast".
  virtual std::string name() const = 0;
  virtual std::string isa() const = 0;  // "scalar", "avx512", "sm_90", ...
  virtual int threads() const = 0;
  // Host buffers in, host buffers out (device backends copy; synchronous).
  virtual turboquant::Status decode(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args) = 0;
  virtual turboquant::Status encode(const turboquant::CacheView& cache, const turboquant::EncodeArgs& args) = 0;

  // For tq bench: the same calls with the inputs resident where the backend
  // computes, so that transfers are not timed. `ms` gets one time per run; the
  // outputs are those of the last run.
  virtual turboquant::Status timed_decode(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args,
                                          const TimingPlan& plan, std::vector<double>* ms);
  virtual turboquant::Status timed_encode(const turboquant::CacheView& cache, const turboquant::EncodeArgs& args,
                                          double* ms);
  // The memory-bandwidth ceiling the decode is compared with, GB/s, and what was measured.
  virtual double probe_gbps();
  virtual std::string probe_name() const;
};

// Throws ToolError: exit 2 for an unknown name, 3 for one not available here.
std::unique_ptr<Backend> make_backend(const BackendRequest& request);

// "cpu" when the fast CPU backend is built in, else "cpu-ref".
std::string default_backend_name();
std::vector<std::string> backend_names();
// SIMD instruction sets this CPU can run, "scalar" first.
std::vector<std::string> available_isas();
// Hardware threads (>= 1).
int hardware_threads();

#ifdef TQ_TOOL_HAVE_CUDA
// backend_cuda.cpp: "cuda" (fast kernels) or "cuda-strict".
std::unique_ptr<Backend> make_cuda_backend(const BackendRequest& request);
#endif

}  // namespace tq
