// Register-level escapes that xsimd 8.1 does not provide, one Isa<A> per
// architecture (isa_avx512.hpp, isa_avx2.hpp): code unpacking, 16-entry table
// lookups, FP8 and fp16 widening, the fused multiply-add, and the contract's
// 16-lane reduction tree (core/reduction.hpp) evaluated for 16 tokens at once.
// Everything else in the kernels is plain xsimd.
//
// A "V16" is the contract's 16 lanes: one zmm on AVX-512, two ymm on AVX2
// (lanes 0-7, 8-15). Include only from an ISA translation unit (isa_*.cpp).
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

namespace turboquant::cpu::simd {

template <class A>
struct Isa;

// The contract's fused multiply-add on registers (see Isa<A>::fma).
template <class A>
xsimd::batch<float, A> fma_rn(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b,
                              const xsimd::batch<float, A>& c) {
  return Isa<A>::fma(a, b, c);
}

// Helpers shared by the Isa specializations have internal linkage: every ISA
// translation unit compiles its own copy (one inline definition shared by
// all of them could be linked in with another ISA's instructions).
static inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
static inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Stores 16 byte-sized codes (one per byte of `codes`) packed as core::pack_codes
// does: 4-bit -> 8 bytes, 3-bit -> 6 bytes (two little-endian 24-bit groups).
template <int Bits>
static inline void pack16(__m128i codes, std::uint8_t* out) {
  if constexpr (Bits == 4) {
    // c[2k] + 16 * c[2k+1] per 16-bit word, then one byte per word.
    const __m128i pairs = _mm_maddubs_epi16(codes, _mm_set1_epi16(0x1001));
    const __m128i bytes = _mm_packus_epi16(pairs, pairs);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
  } else {
    const __m128i pairs = _mm_maddubs_epi16(codes, _mm_set1_epi16(0x0801));  // c0 + 8 c1 (6 bits)
    const __m128i quads = _mm_madd_epi16(pairs, _mm_set1_epi32(0x00400001));  // + 64 (c2 + 8 c3): 12 bits
    const __m128i groups = _mm_or_si128(quads, _mm_srli_epi64(quads, 20));    // 24 bits per qword
    const std::uint64_t g0 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(groups));
    const std::uint64_t g1 = static_cast<std::uint64_t>(_mm_extract_epi64(groups, 1));
    const std::uint8_t b[6] = {static_cast<std::uint8_t>(g0), static_cast<std::uint8_t>(g0 >> 8),
                               static_cast<std::uint8_t>(g0 >> 16), static_cast<std::uint8_t>(g1),
                               static_cast<std::uint8_t>(g1 >> 8), static_cast<std::uint8_t>(g1 >> 16)};
    std::memcpy(out, b, 6);
  }
}

}  // namespace turboquant::cpu::simd

#include "isa_avx2.hpp"
#include "isa_avx512.hpp"
