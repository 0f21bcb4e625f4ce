// Forced into every translation unit of the fuzz build (run_fuzzers.sh,
// -include) while cpu/simd/dispatch.cpp calls __builtin_cpu_supports("f16c"):
// clang 14 does not know that feature name and rejects the file. Routes the
// three feature names the dispatcher uses to CPUID, as g++ does. Delete once
// dispatch.cpp uses <cpuid.h> itself (RELIABILITY.md, findings).
#pragma once
#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__)
#include <cpuid.h>

static inline bool tq_fuzz_cpu_supports(const char* feature) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  const auto is = [feature](const char* name) { return __builtin_strcmp(feature, name) == 0; };
  if (is("f16c")) return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (is("avx512vl")) return b & bit_AVX512VL;
  if (is("avx512vbmi")) return c & bit_AVX512VBMI;
  __builtin_trap();  // a feature this shim does not know: extend it
}
#define __builtin_cpu_supports(feature) tq_fuzz_cpu_supports(feature)
#endif
