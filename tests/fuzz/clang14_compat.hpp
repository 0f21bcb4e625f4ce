// Forced into every translation unit of the fuzz build (run_fuzzers.sh,
// -include) while the CPU backend has two GCC-only constructs that clang
// rejects (RELIABILITY.md, finding F8). Delete once cpu/simd is fixed:
//  - cpu/simd/dispatch.cpp calls __builtin_cpu_supports("f16c"): clang 14 does
//    not know that feature name. Routed to CPUID here, as g++ does it.
//  - cpu/simd/decode_tiles.hpp casts to `_mm_hint`, GCC's enum for
//    _mm_prefetch; clang's _mm_prefetch takes an int.
#pragma once
#if defined(__clang__) && defined(__x86_64__)
typedef int _mm_hint;
#endif
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
