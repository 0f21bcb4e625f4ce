// The entry points of one ISA's kernels (isa_avx512.cpp, isa_avx2.cpp),
// flattened so that no inline function shared with other translation units
// (core/, xsimd's baseline parts) is emitted in the ISA's object with its
// instructions in it (the linker could hand such a copy to baseline code).
// Include only from an ISA translation unit.
#pragma once

#include "decode_rows.hpp"
#include "encode_kernel.hpp"

namespace turboquant::cpu::simd {

template <class A>
struct IsaEntryPoints {
  [[gnu::flatten]] static void decode_item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
    DecodeKernels<A>::decode_item(p, b, h, s, scratch);
  }
  [[gnu::flatten]] static void decode_rows(const DecodeProblem& p, int r0, int r1, int h, int s, float* scratch) {
    DecodeRowsKernels<A>::decode_rows(p, r0, r1, h, s, scratch);
  }
  [[gnu::flatten]] static void merge_row(const DecodeProblem& p, int b, int q_head, float* out, float* lse) {
    DecodeKernels<A>::merge_row(p, b, q_head, out, lse);
  }
  [[gnu::flatten]] static void encode_tokens(const EncodeProblem& p, std::int64_t begin, std::int64_t end) {
    EncodeKernels<A>::encode_tokens(p, begin, end);
  }
};

template <class A>
constexpr IsaKernels isa_kernels(const char* name) {
  using E = IsaEntryPoints<A>;
  return IsaKernels{name, &E::decode_item, &E::decode_rows, &E::merge_row, &E::encode_tokens};
}

}  // namespace turboquant::cpu::simd
