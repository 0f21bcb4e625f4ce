// "cpu:scalar", "cpu:avx2", "cpu:avx512": the fast CPU backend
// (turboquant/cpu.hpp) pinned to one SIMD instruction set, whatever
// TURBOQUANT_ISA says. Which ISAs have kernels in this build comes from
// CMake (TQ_BACKENDS_HAVE_<ISA>_KERNELS, see CMakeLists.txt); which ones this
// CPU runs, from available_isas().
#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

#include "host_backend.hpp"
#include "registry.hpp"
#include "turboquant/cpu.hpp"

// Set by CMakeLists.txt; 0 when compiled outside the build (a syntax check).
#ifndef TQ_BACKENDS_HAVE_AVX2_KERNELS
#define TQ_BACKENDS_HAVE_AVX2_KERNELS 0
#endif
#ifndef TQ_BACKENDS_HAVE_AVX512_KERNELS
#define TQ_BACKENDS_HAVE_AVX512_KERNELS 0
#endif

namespace turboquant::registry {
namespace {

struct Isa {
  const char* name;         // CpuOptions::isa
  const char* label;        // for messages
  const char* description;  // after "the fast CPU backend on "
  bool built;
};

constexpr Isa kIsas[] = {
    {"scalar", "scalar", "portable scalar kernels", true},
    {"avx2", "AVX2", "AVX2 + FMA + F16C kernels", TQ_BACKENDS_HAVE_AVX2_KERNELS != 0},
    {"avx512", "AVX-512", "AVX-512 (F, BW, VL, DQ, CD) kernels", TQ_BACKENDS_HAVE_AVX512_KERNELS != 0},
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The CPU does not change while the process runs: checked once.
Status detect(const Isa& isa) {
  const std::vector<std::string> runnable = available_isas();
  if (std::find(runnable.begin(), runnable.end(), isa.name) != runnable.end()) return Status();
  return Status(StatusCode::kBackendUnavailable,
                isa.built ? std::string("this CPU has no ") + isa.label + " (it runs: " + joined(runnable) + ")"
                          : std::string("built without ") + isa.label + " kernels (the compiler lacks the flags)");
}

class CpuIsaBackend final : public HostBackend {
 public:
  explicit CpuIsaBackend(const Isa& isa)
      : isa_(isa),
        name_(std::string("cpu:") + isa.name),
        description_(std::string("the fast CPU backend on ") + isa.description +
                     ", oneTBB threads: the golden model's bits (dequantize runs the golden model)"),
        status_(detect(isa)) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  Status status() const override { return status_; }
  bool exact_decode() const override { return true; }
  bool threaded() const override { return true; }

 protected:
  Status run_decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& o) const override {
    return decode_cpu(cache, args, options(o));
  }
  Status run_encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions& o) const override {
    return encode_cpu(cache, args, options(o));
  }

 private:
  CpuOptions options(const BackendOptions& o) const { return CpuOptions{o.threads, isa_.name}; }

  Isa isa_;
  std::string name_, description_;
  Status status_;
};

}  // namespace

const Backend& cpu_isa_backend(std::string_view isa) {
  static const std::vector<CpuIsaBackend> all(std::begin(kIsas), std::end(kIsas));
  for (const CpuIsaBackend& b : all) {
    if (b.name().substr(4) == isa) return b;
  }
  throw std::logic_error("registry.cpp names an ISA that kIsas lacks: " + std::string(isa));
}

}  // namespace turboquant::registry
