// The AVX-512 kernels (F, CD, BW, VL, DQ: Skylake-SP, Zen 4 and later).
// Compiled with their own -m flags (cpu/CMakeLists.txt); reached only through
// dispatch.cpp after a run-time check.
#include "isa_entry.hpp"

#if !(XSIMD_WITH_AVX512BW && defined(__AVX512VL__) && defined(__F16C__))
#error "isa_avx512.cpp needs -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mf16c -mfma"
#endif

namespace turboquant::cpu {

extern constinit const IsaKernels kAvx512Kernels = simd::isa_kernels<xsimd::avx512bw>("avx512");

}  // namespace turboquant::cpu
