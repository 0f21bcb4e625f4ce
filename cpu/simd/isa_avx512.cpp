// The AVX-512 kernels (F, CD, BW, VL, DQ: Skylake-SP, Zen 4 and later).
// Compiled with their own -m flags (cpu/CMakeLists.txt); reached only through
// dispatch.cpp after a run-time check. Entry points are flattened so that no
// inline function shared with other translation units is emitted here with
// AVX-512 code in it.
#include "decode_kernel.hpp"
#include "encode_kernel.hpp"

#if !(XSIMD_WITH_AVX512BW && defined(__AVX512VL__) && defined(__F16C__))
#error "isa_avx512.cpp needs -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mf16c -mfma"
#endif

namespace turboquant::cpu {

template struct simd::DecodeKernels<xsimd::avx512bw>;
template struct simd::EncodeKernels<xsimd::avx512bw>;

namespace {

using Decode = simd::DecodeKernels<xsimd::avx512bw>;
using Encode = simd::EncodeKernels<xsimd::avx512bw>;

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

extern const IsaKernels kAvx512Kernels = {"avx512", &decode_item, &merge_row, &encode_tokens};

}  // namespace turboquant::cpu
