// The AVX2 + FMA + F16C kernels (Haswell, Zen 1 and later).
// Compiled with their own -m flags (cpu/CMakeLists.txt); reached only through
// dispatch.cpp after a run-time check. Entry points are flattened so that no
// inline function shared with other translation units is emitted here with
// AVX2 code in it.
#include "decode_kernel.hpp"
#include "encode_kernel.hpp"

#if !(XSIMD_WITH_FMA3_AVX2 && defined(__F16C__))
#error "isa_avx2.cpp needs -mavx2 -mfma -mf16c"
#endif

namespace turboquant::cpu {

template struct simd::DecodeKernels<xsimd::fma3<xsimd::avx2>>;
template struct simd::EncodeKernels<xsimd::fma3<xsimd::avx2>>;

namespace {

using Decode = simd::DecodeKernels<xsimd::fma3<xsimd::avx2>>;
using Encode = simd::EncodeKernels<xsimd::fma3<xsimd::avx2>>;

[[gnu::flatten]] void decode_item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
  Decode::decode_item(p, b, h, s, scratch);
}
[[gnu::flatten]] void merge_row(const DecodeProblem& p, int b, int q_head, float* out, float* lse) {
  Decode::merge_row(p, b, q_head, out, lse);
}
[[gnu::flatten]] void encode_tokens(const EncodeProblem& p, std::int64_t begin, std::int64_t end) {
  Encode::encode_tokens(p, begin, end);
}

}  // namespace

extern const IsaKernels kAvx2Kernels = {"avx2", &decode_item, &merge_row, &encode_tokens};

}  // namespace turboquant::cpu
