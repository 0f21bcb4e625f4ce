// The backends tq runs are the library's registry (turboquant/backend.hpp,
// `tq backends` lists them); --backend takes a registry name or one of tq's
// short names:
//   cpu-ref      the golden model
//   cpu          the fast CPU backend on --isa, else $TURBOQUANT_ISA, else the
//                best ISA this CPU runs ("cpu:avx2", ...)
//   cuda         cuda:fast, the tensor-core decode
//   cuda-strict  cuda:strict, the kernels that reproduce the golden model's bits
// An unknown name is a ToolError with exit code 2, a backend that cannot run
// here one with exit code 3. What tq adds is the timing of tq bench.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "turboquant/turboquant.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace tq {

struct BackendRequest {
  std::string name;  // empty: default_backend_name()
  std::string isa;   // empty: the best this CPU runs (or $TURBOQUANT_ISA)
  int threads = 0;   // 0: all hardware threads
};

// --backend, --isa and --threads, bound to `request` (decode, encode, bench).
void add_backend_options(CLI::App* app, BackendRequest* request);

// What tq encode and tq decode share: a case in, a file out, a backend, --json.
struct CaseRunOptions {
  std::string case_dir;
  std::string out;
  BackendRequest backend{"cpu-ref", "", 0};
  bool json = false;
};
struct CaseRunHelp {
  std::string name, help;
  std::string files;     // what the command reads from the case directory
  std::string out_help;  // what --out gets
  bool out_required = false;
};
// The subcommand with CASE, --out, the backend options and --json bound to `o`.
CLI::App* add_case_run_command(CLI::App& parent, const CaseRunHelp& help, CaseRunOptions* o);
// That subcommand with options of type Options (a CaseRunOptions): `more` adds
// the command's own options, `run` runs it once parsed.
template <class Options, class More>
Command case_run_command(CLI::App& parent, const CaseRunHelp& help, More more, int (*run)(const Options&)) {
  auto o = std::make_shared<Options>();
  CLI::App* app = add_case_run_command(parent, help, o.get());
  more(app, o.get());
  return Command{app, [o, run] { return run(*o); }};
}

// How many timed runs: at least min_runs, more while under min_seconds, at most max_runs.
struct TimingPlan {
  int min_runs = 3;
  int max_runs = 15;
  double min_seconds = 1.0;
};

// A registry backend with the options of one tq run.
class Backend {
 public:
  Backend(const turboquant::Backend& backend, int threads) : backend_(backend), options_{threads} {}
  virtual ~Backend() = default;
  // The registry name, e.g. "cpu-ref", "cpu:avx2", "cuda:fast".
  std::string name() const { return std::string(backend_.name()); }
  virtual std::string isa() const;  // "scalar", "avx512", "sm_90", ...
  int threads() const;
  // Host buffers in, host buffers out (device backends copy; synchronous).
  turboquant::Status decode(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args) const {
    return backend_.decode(cache, args, options_);
  }
  turboquant::Status encode(const turboquant::CacheView& cache, const turboquant::EncodeArgs& args) const {
    return backend_.encode(cache, args, options_);
  }

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

 protected:
  const turboquant::Backend& backend_;
  turboquant::BackendOptions options_;
};

// Throws ToolError: exit 2 for an unknown name, 3 for one not available here.
std::unique_ptr<Backend> make_backend(const BackendRequest& request);

// "cpu": the fast CPU backend on the best ISA.
std::string default_backend_name();
// tq's short names, then the registry's.
std::vector<std::string> backend_names();
// SIMD instruction sets this CPU can run, "scalar" first.
std::vector<std::string> available_isas();
// Hardware threads (>= 1).
int hardware_threads();

#ifdef TQ_TOOL_HAVE_CUDA
// backend_cuda.cpp: a CUDA registry backend with device-resident timing.
std::unique_ptr<Backend> make_cuda_backend(const turboquant::Backend& backend);
#endif

}  // namespace tq
