#include "backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common.hpp"
#include "workload.hpp"

// The fast CPU backend is wired in when its header is part of this tree.
#if __has_include("turboquant/cpu.hpp")
#include "turboquant/cpu.hpp"
#define TQ_TOOL_HAVE_CPU_BACKEND 1
#endif

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

// The golden model. `label` is "cpu-ref", or "cpu" when it stands in for a
// fast CPU backend this build does not have.
class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(std::string label) : label_(std::move(label)) {}
  std::string name() const override { return label_; }
  std::string isa() const override { return "scalar"; }
  int threads() const override { return 1; }
  Status decode(const ConstCacheView& cache, const DecodeArgs& args) override {
    return turboquant::decode_reference(cache, args);
  }
  Status encode(const CacheView& cache, const EncodeArgs& args) override {
    return turboquant::encode_reference(cache, args);
  }

 private:
  std::string label_;
};

void check_isa_is_scalar(const std::string& backend, const std::string& isa) {
  if (isa.empty() || isa == "scalar") return;
  fail_unavailable("--isa " + isa + ": backend " + backend +
                   " runs only scalar code (this CPU runs: " + joined(available_isas()) + ")");
}

#ifdef TQ_TOOL_HAVE_CPU_BACKEND
class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(turboquant::CpuOptions options) : options_(std::move(options)) {
    name_ = turboquant::cpu_backend_name(options_);
  }
  const std::string& resolved_name() const { return name_; }
  std::string name() const override { return name_; }
  std::string isa() const override {
    const std::size_t colon = name_.find(':');
    return colon == std::string::npos ? name_ : name_.substr(colon + 1);
  }
  int threads() const override { return options_.threads > 0 ? options_.threads : hardware_threads(); }
  Status decode(const ConstCacheView& cache, const DecodeArgs& args) override {
    return turboquant::decode_cpu(cache, args, options_);
  }
  Status encode(const CacheView& cache, const EncodeArgs& args) override {
    return turboquant::encode_cpu(cache, args, options_);
  }

 private:
  turboquant::CpuOptions options_;
  std::string name_;
};
#endif

std::unique_ptr<Backend> make_cpu(const BackendRequest& r) {
#ifdef TQ_TOOL_HAVE_CPU_BACKEND
  turboquant::CpuOptions options;
  options.threads = r.threads;
  options.isa = r.isa;
  auto backend = std::make_unique<CpuBackend>(options);
  if (backend->resolved_name().empty()) {
    const char* env = std::getenv("TURBOQUANT_ISA");
    const std::string isa = !r.isa.empty() ? "--isa " + r.isa : "TURBOQUANT_ISA=" + std::string(env ? env : "");
    fail_unavailable(isa + ": not an ISA this CPU runs (available: " + joined(available_isas()) + ")");
  }
  return backend;
#else
  // No fast CPU backend in this build: the golden model stands in for it.
  check_isa_is_scalar("cpu", r.isa);
  return std::make_unique<ReferenceBackend>("cpu");
#endif
}

}  // namespace

Status Backend::timed_decode(const ConstCacheView& cache, const DecodeArgs& args, const TimingPlan& plan,
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

Status Backend::timed_encode(const CacheView& cache, const EncodeArgs& args, double* ms) {
  const auto start = Clock::now();
  const Status s = encode(cache, args);
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return s;
}

double Backend::probe_gbps() { return probe_read_gbps(hardware_threads()); }

std::string Backend::probe_name() const {
  return "CPU memory read, " + std::to_string(hardware_threads()) + " threads";
}

std::string default_backend_name() {
#ifdef TQ_TOOL_HAVE_CPU_BACKEND
  return "cpu";
#else
  return "cpu-ref";
#endif
}

std::vector<std::string> backend_names() { return {"cpu-ref", "cpu", "cuda", "cuda-strict"}; }

std::vector<std::string> available_isas() {
#ifdef TQ_TOOL_HAVE_CPU_BACKEND
  return turboquant::available_isas();
#else
  return {"scalar"};
#endif
}

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::unique_ptr<Backend> make_backend(const BackendRequest& request) {
  BackendRequest r = request;
  if (r.name.empty()) r.name = default_backend_name();
  if (r.threads < 0) fail("--threads", std::to_string(r.threads) + " must be >= 0 (0: all hardware threads)");
  if (r.name == "cpu-ref") {
    check_isa_is_scalar("cpu-ref", r.isa);
    return std::make_unique<ReferenceBackend>("cpu-ref");
  }
  if (r.name == "cpu") return make_cpu(r);
  if (r.name == "cuda" || r.name == "cuda-strict") {
#ifdef TQ_TOOL_HAVE_CUDA
    return make_cuda_backend(r);
#else
    fail_unavailable("backend " + r.name + ": not built with CUDA (configure with -DTURBOQUANT_ENABLE_CUDA=ON)");
#endif
  }
  fail("--backend", "unknown backend \"" + r.name + "\" (expected one of " + joined(backend_names()) + ")");
}

}  // namespace tq
