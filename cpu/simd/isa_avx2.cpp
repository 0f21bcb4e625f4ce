// The AVX2 + FMA + F16C kernels (Haswell, Zen 1 and later).
// Compiled with their own -m flags (cpu/CMakeLists.txt); reached only through
// dispatch.cpp after a run-time check.
#include "isa_entry.hpp"

#if !(XSIMD_WITH_FMA3_AVX2 && defined(__F16C__))
#error "isa_avx2.cpp needs -mavx2 -mfma -mf16c"
#endif

namespace turboquant::cpu {

extern constinit const IsaKernels kAvx2Kernels = simd::isa_kernels<xsimd::fma3<xsimd::avx2>>("avx2");

}  // namespace turboquant::cpu
