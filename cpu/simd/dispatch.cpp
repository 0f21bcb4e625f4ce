// The ISA table and the run-time CPU checks (baseline flags: this file runs on
// every x86-64 CPU).
#include "dispatch.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <xsimd/xsimd.hpp>

namespace turboquant::cpu {

extern const IsaKernels kScalarKernels;
#if TQ_HAVE_AVX512_KERNELS
extern const IsaKernels kAvx512Kernels;
#endif
#if TQ_HAVE_AVX2_KERNELS
extern const IsaKernels kAvx2Kernels;
#endif

namespace {

// F16C (vcvtph2ps / vcvtps2ph): CPUID leaf 1, ECX bit 29. Read directly rather
// than with __builtin_cpu_supports("f16c"), which clang 14 does not know
// (docs/RELIABILITY.md, finding F8).
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

struct IsaEntry {
  const IsaKernels* kernels;
  bool supported;
};

// High to low, the baseline last. Detected once.
const std::vector<IsaEntry>& isa_table() {
  static const std::vector<IsaEntry> table = [] {
    const auto cpu = xsimd::available_architectures();
    __builtin_cpu_init();
    std::vector<IsaEntry> t;
#if TQ_HAVE_AVX512_KERNELS
    // xsimd's avx512bw implies F, CD, DQ, BW (and OS support of the zmm state).
    t.push_back({&kAvx512Kernels, cpu.avx512bw && __builtin_cpu_supports("avx512vl") &&
                                      cpu_has_f16c() && cpu.fma3_avx2});
#endif
#if TQ_HAVE_AVX2_KERNELS
    t.push_back({&kAvx2Kernels, cpu.fma3_avx2 && cpu_has_f16c()});
#endif
    t.push_back({&kScalarKernels, true});
    return t;
  }();
  return table;
}

std::string known_names() {
  std::string s;
  for (const IsaEntry& e : isa_table()) s += std::string(s.empty() ? "" : ", ") + e.kernels->name;
  return s;
}

std::string runnable_names() {
  std::string s;
  for (const std::string& n : runnable_isas()) s += std::string(s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> runnable_isas() {
  std::vector<std::string> names;
  const auto& t = isa_table();
  for (auto it = t.rbegin(); it != t.rend(); ++it) {
    if (it->supported) names.emplace_back(it->kernels->name);
  }
  return names;
}

Status select_isa(std::string_view requested, const IsaKernels** out) {
  std::string_view source = "isa";
  if (requested.empty()) {
    if (const char* env = std::getenv("TURBOQUANT_ISA"); env != nullptr && *env != '\0') {
      requested = env;
      source = "TURBOQUANT_ISA";
    }
  }
  for (const IsaEntry& e : isa_table()) {
    if (!requested.empty() && requested != e.kernels->name) continue;
    if (e.supported) {
      *out = e.kernels;
      return Status();
    }
    if (!requested.empty()) {
      return Status(StatusCode::kBackendUnavailable, std::string(source) + " = \"" + std::string(requested) +
                                                         "\": this CPU cannot run it (available: " +
                                                         runnable_names() + ")");
    }
  }
  return Status(StatusCode::kBackendUnavailable, std::string(source) + " = \"" + std::string(requested) +
                                                     "\" is not a known ISA (known: " + known_names() + ")");
}

Status start_call(const CpuOptions& options, const Status& arguments, const IsaKernels** out) {
  if (options.threads < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "options.threads = " + std::to_string(options.threads) + ": must be >= 0 (0: all)");
  }
  if (!arguments.ok()) return arguments;
  return select_isa(options.isa, out);
}

}  // namespace turboquant::cpu
