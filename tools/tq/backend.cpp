#include "backend.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common.hpp"
#include "workload.hpp"

namespace tq {
namespace {

using turboquant::CacheView;
using turboquant::ConstCacheView;
using turboquant::DecodeArgs;
using turboquant::EncodeArgs;
using Clock = std::chrono::steady_clock;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The registry name a request selects; throws for --isa values that do not fit.
std::string registry_name(const BackendRequest& r) {
  if (r.name == "cpu-ref") {
    if (!r.isa.empty() && r.isa != "scalar") {
      fail_unavailable("--isa " + r.isa + ": backend cpu-ref runs only scalar code (this CPU runs: " +
                       joined(available_isas()) + ")");
    }
    return r.name;
  }
  if (r.name == "cpu") {
    // The library's choice: --isa, else $TURBOQUANT_ISA, else the best ISA.
    const std::string name = turboquant::cpu_backend_name(turboquant::CpuOptions{0, r.isa});
    if (name.empty()) {
      const char* env = std::getenv("TURBOQUANT_ISA");
      const std::string isa = !r.isa.empty() ? "--isa " + r.isa : "TURBOQUANT_ISA=" + std::string(env ? env : "");
      fail_unavailable(isa + ": not an ISA this CPU runs (available: " + joined(available_isas()) + ")");
    }
    return name;
  }
  if (r.name == "cuda") return "cuda:fast";
  if (r.name == "cuda-strict") return "cuda:strict";
  // A registry name: --isa may only repeat a cpu backend's own ISA.
  if (!r.isa.empty() && r.name != "cpu:" + r.isa) {
    fail("--isa", r.isa + ": backend " + r.name + " fixes its own ISA (use --backend cpu --isa " + r.isa + ")");
  }
  return r.name;
}

}  // namespace

void add_backend_options(CLI::App* app, BackendRequest* request) {
  app->add_option("--backend", request->name, "cpu-ref, cpu, cuda, cuda-strict, or a name tq backends lists")
      ->capture_default_str();
  app->add_option("--isa", request->isa, "Force a SIMD instruction set of the cpu backend (see tq isas)");
  app->add_option("--threads", request->threads, "CPU threads (0: all)")
      ->transform(int32_value())
      ->capture_default_str();
}

CLI::App* add_case_run_command(CLI::App& parent, const CaseRunHelp& help, CaseRunOptions* o) {
  CLI::App* app = parent.add_subcommand(help.name, help.help);
  add_case_argument(app, &o->case_dir, help.files);
  app->add_option("--out", o->out, help.out_help)->required(help.out_required)->check(non_empty_path());
  add_backend_options(app, &o->backend);
  app->add_flag("--json", o->json, "Print one JSON object");
  return app;
}

std::string Backend::isa() const {
  const std::string n = name();
  return n.rfind("cpu:", 0) == 0 ? n.substr(4) : "scalar";
}

int Backend::threads() const {
  if (!backend_.threaded()) return 1;
  return options_.threads > 0 ? options_.threads : hardware_threads();
}

turboquant::Status Backend::timed_decode(const ConstCacheView& cache, const DecodeArgs& args, const TimingPlan& plan,
                                         std::vector<double>* ms) {
  ms->clear();
  const auto all = Clock::now();
  while (true) {
    const auto start = Clock::now();
    if (Status s = decode(cache, args); !s.ok()) return s;
    ms->push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    const int n = static_cast<int>(ms->size());
    const double elapsed = std::chrono::duration<double>(Clock::now() - all).count();
    if (n >= plan.max_runs || (n >= plan.min_runs && elapsed >= plan.min_seconds)) return Status();
  }
}

turboquant::Status Backend::timed_encode(const CacheView& cache, const EncodeArgs& args, double* ms) {
  const auto start = Clock::now();
  const Status s = encode(cache, args);
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return s;
}

double Backend::probe_gbps() { return probe_read_gbps(hardware_threads()); }

std::string Backend::probe_name() const {
  return "CPU memory read, " + std::to_string(hardware_threads()) + " threads";
}

std::string default_backend_name() { return "cpu"; }

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu-ref", "cpu", "cuda", "cuda-strict"};
  for (const turboquant::Backend* b : turboquant::backends()) {
    if (std::find(names.begin(), names.end(), b->name()) == names.end()) names.emplace_back(b->name());
  }
  return names;
}

std::vector<std::string> available_isas() { return turboquant::available_isas(); }

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::unique_ptr<Backend> make_backend(const BackendRequest& request) {
  BackendRequest r = request;
  if (r.name.empty()) r.name = default_backend_name();
  if (r.threads < 0) fail("--threads", std::to_string(r.threads) + " must be >= 0 (0: all hardware threads)");
  const std::string name = registry_name(r);
  const turboquant::Backend* backend = turboquant::find_backend(name);
  if (backend == nullptr) {
    fail("--backend", "unknown backend \"" + r.name + "\" (expected one of " + joined(backend_names()) + ")");
  }
  if (const Status s = backend->status(); !s.ok()) fail_unavailable("backend " + r.name + ": " + s.message());
#ifdef TQ_TOOL_HAVE_CUDA
  if (name.rfind("cuda:", 0) == 0) {
    if (!r.isa.empty()) fail("--isa", r.isa + ": applies to the CPU backends only, not " + r.name);
    return make_cuda_backend(*backend);
  }
#endif
  return std::make_unique<Backend>(*backend, r.threads);
}

}  // namespace tq
