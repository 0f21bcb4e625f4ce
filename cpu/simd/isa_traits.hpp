// Register-level escapes that xsimd 8.1 does not provide, per architecture:
// code unpacking, 16-entry table lookups, FP8 and fp16 widening, and the
// contract's 16-lane reduction tree (core/reduction.hpp) evaluated for 16
// tokens at once. Everything else in the kernels is plain xsimd.
//
// A "V16" is the contract's 16 lanes: one zmm on AVX-512, two ymm on AVX2
// (lanes 0-7, 8-15). Include only from an ISA translation unit (isa_*.cpp).
#pragma once

#include <immintrin.h>

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

inline std::uint64_t load_u64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Stores 16 byte-sized codes (one per byte of `codes`) packed as core::pack_codes
// does: 4-bit -> 8 bytes, 3-bit -> 6 bytes (two little-endian 24-bit groups).
template <int Bits>
inline void pack16(__m128i codes, std::uint8_t* out) {
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

// ---------------------------------------------------------------- AVX-512 --
#if XSIMD_WITH_AVX512BW && defined(__AVX512VBMI__) && defined(__AVX512VL__)
template <>
struct Isa<xsimd::avx512bw> {
  using arch = xsimd::avx512bw;
  using F = xsimd::batch<float, arch>;
  static constexpr int kRegs = 1;        // registers per V16
  static constexpr int kWidth = 16;      // floats per register
  static constexpr int kHeadBlock = 8;   // query heads whose accumulators stay in registers
  static constexpr int kKeyTokens = 2;   // tokens whose dot products run interleaved
  static constexpr int kValueChunks = 2; // dim chunks whose accumulations run interleaved
  static constexpr int kSlotFloats = 16; // floats stored per (head, token) for the tile reduction

  // a * b + c with one rounding. Not xsimd::fma: xsimd 8.1 has no AVX-512 fma
  // kernel and falls back to x * y + z, which rounds twice.
  static F fma(const F& a, const F& b, const F& c) { return _mm512_fmadd_ps(a, b, c); }

  struct Table {
    __m512 t;
  };
  static Table table(const float* t16) { return {_mm512_loadu_ps(t16)}; }

  using Codes = __m512i;  // dword lanes, code in the low bits
  static Codes make_codes(const xsimd::batch<std::int32_t, arch>* c) { return c[0]; }

  // Codes of dims [16c, 16c + 16) of a packed record: dword i's low `Bits`
  // bits hold the code of dim 16c + i (higher bits are garbage that the
  // lookups ignore). The chunk's 8 bytes are broadcast (a load), vpshufb puts
  // the byte(s) holding code i at the bottom of dword i, and vpsrlvd shifts the
  // code down. (vpmultishiftqb does this in one instruction but runs on the
  // FMA pipes of Zen 4, which the dot products keep busy.) May read up to 2
  // bytes past a 3-bit record, which is inside the block (the metadata region
  // follows the last record).
  template <int Bits>
  static __m512i codes(const std::uint8_t* rec, int c) {
    if constexpr (Bits == 4) {
      const __m512i q = _mm512_set1_epi64(static_cast<long long>(load_u64(rec + 8 * c)));
      const __m512i bytes = _mm512_shuffle_epi8(q, shuffle4());
      return _mm512_srlv_epi32(bytes, _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0));
    } else {
      const __m512i q = _mm512_set1_epi64(static_cast<long long>(load_u64(rec + 6 * c)));
      const __m512i bytes = _mm512_shuffle_epi8(q, shuffle3());
      return _mm512_srlv_epi32(bytes, _mm512_set_epi32(5, 2, 7, 4, 1, 6, 3, 0, 5, 2, 7, 4, 1, 6, 3, 0));
    }
  }
  // vpshufb controls (per 128-bit lane, which holds the broadcast qword
  // twice): dword i <- byte i/2 (4-bit); bytes 3i/8 and 3i/8 + 1 (3-bit).
  static __m512i shuffle4() {
    return _mm512_set_epi32(static_cast<int>(0x80808007u), static_cast<int>(0x80808007u),
                            static_cast<int>(0x80808006u), static_cast<int>(0x80808006u),
                            static_cast<int>(0x80808005u), static_cast<int>(0x80808005u),
                            static_cast<int>(0x80808004u), static_cast<int>(0x80808004u),
                            static_cast<int>(0x80808003u), static_cast<int>(0x80808003u),
                            static_cast<int>(0x80808002u), static_cast<int>(0x80808002u),
                            static_cast<int>(0x80808001u), static_cast<int>(0x80808001u),
                            static_cast<int>(0x80808000u), static_cast<int>(0x80808000u));
  }
  static __m512i shuffle3() {
    return _mm512_set_epi32(static_cast<int>(0x80800605u), static_cast<int>(0x80800605u),
                            static_cast<int>(0x80800504u), static_cast<int>(0x80800504u),
                            static_cast<int>(0x80800504u), static_cast<int>(0x80800403u),
                            static_cast<int>(0x80800403u), static_cast<int>(0x80800403u),
                            static_cast<int>(0x80800302u), static_cast<int>(0x80800302u),
                            static_cast<int>(0x80800201u), static_cast<int>(0x80800201u),
                            static_cast<int>(0x80800201u), static_cast<int>(0x80800100u),
                            static_cast<int>(0x80800100u), static_cast<int>(0x80800100u));
  }

  // table[code] per lane. 3-bit tables are stored twice (entries i and i + 8
  // equal) so that the garbage fourth index bit does not matter.
  template <int Bits>
  static void lookup(__m512i idx, const Table& t, F* out) {
    out[0] = _mm512_permutexvar_ps(idx, t.t);
  }
  template <int Bits>
  static void lookup_mem(__m512i idx, const float* t16, F* out) {
    out[0] = _mm512_permutexvar_ps(idx, _mm512_loadu_ps(t16));
  }

  // FP8 e4m3 -> fp32 for 16 bytes, exact for every code but NaN (0x7f, 0xff):
  // sign-extended byte << 20 keeps the sign at bit 31 and puts exponent and
  // mantissa under fp32's, so the bits read as value * 2^-120 (subnormals
  // included); the product by 2^120 is exact.
  static void fp8(const std::uint8_t* p, F* out) {
    const __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(x, 20), _mm512_set1_epi32(static_cast<int>(0x87f00000u)));
    out[0] = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p+120f));
  }
  // Whether any of `dims` FP8 bytes is a NaN code.
  static bool fp8_has_nan(const std::uint8_t* p, int dims) {
    const __m512i top = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i all = _mm512_set1_epi8(static_cast<char>(0xff));
    __mmask64 hit = 0;
    for (int d = 0; d < dims; d += 64) {
      const int n = dims - d < 64 ? dims - d : 64;
      const __mmask64 m = n == 64 ? ~__mmask64{0} : ((__mmask64{1} << n) - 1);
      const __m512i x = _mm512_maskz_loadu_epi8(m, p + d);
      hit |= _mm512_mask_cmpeq_epi8_mask(m, _mm512_or_si512(x, top), all);
    }
    return hit != 0;
  }

  // 16 fp16 -> fp32 (exact; a signaling NaN comes back quiet, which no later
  // arithmetic can tell apart).
  static void half16(const std::uint16_t* h, F* out) {
    out[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
  static void bf16x16(const std::uint16_t* h, F* out) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }

  // Where token t's lanes go in the tile buffer so that reduce_tile returns
  // token t in lane t.
  static constexpr int slot_of(int t) { return (t >> 2) + 4 * (t & 3); }
  static void store_dot(float* slot, const F* acc) { _mm512_storeu_ps(slot, acc[0]); }

  // red[slot][16] -> lane t = reduce_lanes16(lanes of token t): the tree
  // j += j+8, j += j+4, j += j+2, j += j+1, for 16 tokens with 15 adds.
  static void reduce_tile(const float* red, F* out) {
    __m512 w[8];
    for (int p = 0; p < 8; ++p) {
      const __m512 a = _mm512_loadu_ps(red + 32 * p);
      const __m512 b = _mm512_loadu_ps(red + 32 * p + 16);
      w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    __m512 z[4];
    for (int r = 0; r < 4; ++r) {
      z[r] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * r], w[2 * r + 1], 0x88),
                           _mm512_shuffle_f32x4(w[2 * r], w[2 * r + 1], 0xdd));
    }
    __m512 u[2];
    for (int m = 0; m < 2; ++m) {
      u[m] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    out[0] = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }

  // The maximum of 16 lanes holding no NaN.
  static float max16(const F* v) { return _mm512_reduce_max_ps(v[0]); }

  // One V16's lanes reduced by the same tree (lane 0 of the result).
  static float reduce_one(const F* v) {
    __m512 x = v[0];
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0x4e));                 // j += j+8
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0xb1));                 // j += j+4
    x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));    // j += j+2
    x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));    // j += j+1
    return _mm512_cvtss_f32(x);
  }

  // Walsh-Hadamard butterflies of distance h (< 16) inside one register.
  template <int H>
  static __m512 butterfly(__m512 x) {
    __m512 partner;
    __mmask16 upper;
    if constexpr (H == 1) {
      partner = _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1));
      upper = 0xaaaa;
    } else if constexpr (H == 2) {
      partner = _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2));
      upper = 0xcccc;
    } else if constexpr (H == 4) {
      partner = _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1));
      upper = 0xf0f0;
    } else {
      partner = _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2));
      upper = 0xff00;
    }
    // lower lane j: x[j] + x[j+h]; upper lane j+h: x[j] - x[j+h] = partner - x.
    return _mm512_mask_blend_ps(upper, _mm512_add_ps(x, partner), _mm512_sub_ps(partner, x));
  }

  // 16 dword codes -> 16 bytes.
  static __m128i codes_to_bytes(const xsimd::batch<std::int32_t, arch>* c) { return _mm512_cvtepi32_epi8(c[0]); }

  // 4 floats -> 4 fp16 with round-to-nearest-even (callers clamp first).
  static __m128i to_half4(__m128 x) { return _mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
};
#endif

// ------------------------------------------------------------- AVX2 + FMA --
#if XSIMD_WITH_FMA3_AVX2 && defined(__F16C__)
template <>
struct Isa<xsimd::fma3<xsimd::avx2>> {
  using arch = xsimd::fma3<xsimd::avx2>;
  using F = xsimd::batch<float, arch>;
  static constexpr int kRegs = 2;
  static constexpr int kWidth = 8;
  static constexpr int kHeadBlock = 4;  // 16 ymm registers only
  static constexpr int kKeyTokens = 1;
  static constexpr int kValueChunks = 1;
  static constexpr int kSlotFloats = 8; // lanes j + (j+8) are added before storing

  static F fma(const F& a, const F& b, const F& c) { return _mm256_fmadd_ps(a, b, c); }

  struct Table {
    __m256 lo, hi;  // entries 0-7, 8-15
  };
  static Table table(const float* t16) { return {_mm256_loadu_ps(t16), _mm256_loadu_ps(t16 + 8)}; }

  struct Codes {
    __m256i lo, hi;
  };
  static Codes make_codes(const xsimd::batch<std::int32_t, arch>* c) { return {c[0], c[1]}; }
  // One broadcast dword shifted by a different amount per lane: 8 codes per
  // register. May read 1 byte past a 3-bit record (inside the block).
  template <int Bits>
  static Codes codes(const std::uint8_t* rec, int c) {
    if constexpr (Bits == 4) {
      const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
      return {_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(rec + 8 * c))), sh),
              _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(rec + 8 * c + 4))), sh)};
    } else {
      const __m256i sh = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
      return {_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(rec + 6 * c))), sh),
              _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(rec + 6 * c + 3))), sh)};
    }
  }

  // vpermps uses 3 index bits: 16 entries take two of them and a blend on bit 3.
  static __m256 lookup16(__m256i idx, __m256 lo, __m256 hi) {
    const __m256 a = _mm256_permutevar8x32_ps(lo, idx);
    const __m256 b = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  template <int Bits>
  static void lookup(const Codes& idx, const Table& t, F* out) {
    if constexpr (Bits == 4) {
      out[0] = lookup16(idx.lo, t.lo, t.hi);
      out[1] = lookup16(idx.hi, t.lo, t.hi);
    } else {
      out[0] = _mm256_permutevar8x32_ps(t.lo, idx.lo);
      out[1] = _mm256_permutevar8x32_ps(t.lo, idx.hi);
    }
  }
  template <int Bits>
  static void lookup_mem(const Codes& idx, const float* t16, F* out) {
    lookup<Bits>(idx, Table{_mm256_loadu_ps(t16), _mm256_loadu_ps(t16 + 8)}, out);
  }

  static __m256 fp8_8(const std::uint8_t* p) {
    const __m256i x = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i bits = _mm256_and_si256(_mm256_slli_epi32(x, 20), _mm256_set1_epi32(static_cast<int>(0x87f00000u)));
    return _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p+120f));
  }
  static void fp8(const std::uint8_t* p, F* out) {
    out[0] = fp8_8(p);
    out[1] = fp8_8(p + 8);
  }
  static bool fp8_has_nan(const std::uint8_t* p, int dims) {
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i all = _mm256_set1_epi8(static_cast<char>(0xff));
    int hit = 0;
    int d = 0;
    for (; d + 32 <= dims; d += 32) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + d));
      hit |= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_or_si256(x, top), all));
    }
    if (d < dims) {  // dims % 16 == 0
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d));
      hit |= _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_or_si128(x, _mm256_castsi256_si128(top)), _mm256_castsi256_si128(all)));
    }
    return hit != 0;
  }

  static void half16(const std::uint16_t* h, F* out) {
    out[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
    out[1] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)));
  }
  static void bf16x16(const std::uint16_t* h, F* out) {
    for (int r = 0; r < 2; ++r) {
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8 * r)));
      out[r] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
  }

  static constexpr int slot_of(int t) { return (t & 8) + ((t & 7) < 4 ? 2 * (t & 7) : 2 * (t & 7) - 7); }
  // The tree's first step (j += j+8) is the sum of the two registers.
  static void store_dot(float* slot, const F* acc) { _mm256_storeu_ps(slot, _mm256_add_ps(acc[0], acc[1])); }

  static void reduce_tile(const float* red, F* out) {
    __m256 w[8];
    for (int p = 0; p < 8; ++p) {
      const __m256 a = _mm256_loadu_ps(red + 16 * p);
      const __m256 b = _mm256_loadu_ps(red + 16 * p + 8);
      w[p] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    __m256 z[4];
    for (int r = 0; r < 4; ++r) {
      z[r] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * r], w[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(w[2 * r], w[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int m = 0; m < 2; ++m) {
      out[m] = _mm256_add_ps(_mm256_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }

  static float max16(const F* v) {
    __m256 x = _mm256_max_ps(v[0], v[1]);
    x = _mm256_max_ps(x, _mm256_permute2f128_ps(x, x, 1));
    x = _mm256_max_ps(x, _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm256_max_ps(x, _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtss_f32(x);
  }

  static float reduce_one(const F* v) {
    __m256 x = _mm256_add_ps(v[0], v[1]);                                 // j += j+8
    x = _mm256_add_ps(x, _mm256_permute2f128_ps(x, x, 1));                // j += j+4
    x = _mm256_add_ps(x, _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));  // j += j+2
    x = _mm256_add_ps(x, _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));  // j += j+1
    return _mm256_cvtss_f32(x);
  }

  template <int H>
  static __m256 butterfly(__m256 x) {
    if constexpr (H == 1) {
      const __m256 p = _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1));
      return _mm256_blend_ps(_mm256_add_ps(x, p), _mm256_sub_ps(p, x), 0xaa);
    } else if constexpr (H == 2) {
      const __m256 p = _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2));
      return _mm256_blend_ps(_mm256_add_ps(x, p), _mm256_sub_ps(p, x), 0xcc);
    } else {
      const __m256 p = _mm256_permute2f128_ps(x, x, 1);
      return _mm256_blend_ps(_mm256_add_ps(x, p), _mm256_sub_ps(p, x), 0xf0);
    }
  }

  static __m128i codes_to_bytes(const xsimd::batch<std::int32_t, arch>* c) {
    const __m256i w = _mm256_packs_epi32(c[0], c[1]);  // per 128-bit half: lo0-3 hi0-3 | lo4-7 hi4-7
    const __m256i words = _mm256_permute4x64_epi64(w, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  }

  static __m128i to_half4(__m128 x) { return _mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
};
#endif

}  // namespace turboquant::cpu::simd
