// Isa<xsimd::avx512bw>: AVX-512 F, CD, BW, VL and DQ (see isa_traits.hpp).
// Only defined when the translation unit is compiled for it.
#pragma once

#include "isa_traits.hpp"

namespace turboquant::cpu::simd {

#if XSIMD_WITH_AVX512BW && defined(__AVX512VL__)
template <>
struct Isa<xsimd::avx512bw> {
  using arch = xsimd::avx512bw;
  using F = xsimd::batch<float, arch>;
  static constexpr int kRegs = 1;        // registers per V16
  static constexpr int kWidth = 16;      // floats per register
  static constexpr int kHeadBlock = 8;   // query heads whose accumulators stay in registers
  static constexpr int kVectorRegisters = 32;  // what register blocks of the hot loops may fill
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
      const __m512i bytes = _mm512_shuffle_epi8(q, code_shuffle<4>());
      return _mm512_srlv_epi32(bytes, _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0));
    } else {
      const __m512i q = _mm512_set1_epi64(static_cast<long long>(load_u64(rec + 6 * c)));
      const __m512i bytes = _mm512_shuffle_epi8(q, code_shuffle<3>());
      return _mm512_srlv_epi32(bytes, _mm512_set_epi32(5, 2, 7, 4, 1, 6, 3, 0, 5, 2, 7, 4, 1, 6, 3, 0));
    }
  }
  // vpshufb controls (per 128-bit lane, which holds the broadcast qword
  // twice): dword i <- byte i/2 (4-bit); bytes 3i/8 and 3i/8 + 1 (3-bit);
  // 0x80 zeroes the other bytes.
  template <int Bits>
  static __m512i code_shuffle() {
    alignas(64) static constexpr std::array<std::uint32_t, 16> kControl = [] {
      std::array<std::uint32_t, 16> c{};
      for (std::uint32_t i = 0; i < 16; ++i) {
        const std::uint32_t first = Bits == 4 ? i / 2 : 3 * i / 8;
        c[i] = Bits == 4 ? 0x80808000u | first : 0x80800000u | (first + 1) << 8 | first;
      }
      return c;
    }();
    return _mm512_load_si512(kControl.data());
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
  // For records i < n: the fp16 at recs[i] + offset into lane i of lo and,
  // with hi, the fp16 2 bytes later into hi's; lanes >= n are 0. The 4 bytes
  // at + offset must lie in the record. Two gathers of 8 dwords by address:
  // 2-byte copies into a buffer read back as one vector stall the load on
  // store forwarding, once per field and tile (AoS metadata, decode_tiles.hpp).
  static void record_halves(const std::uint8_t* const* recs, int n, std::int64_t offset, F* lo, F* hi) {
    const __mmask8 m0 = static_cast<__mmask8>(n >= 8 ? 0xffu : (1u << n) - 1u);
    const __mmask8 m1 = static_cast<__mmask8>(n >= 16 ? 0xffu : n > 8 ? (1u << (n - 8)) - 1u : 0u);
    const __m512i off = _mm512_set1_epi64(offset);
    const __m512i a0 = _mm512_add_epi64(_mm512_maskz_loadu_epi64(m0, recs), off);
    const __m512i a1 = _mm512_add_epi64(_mm512_maskz_loadu_epi64(m1, recs + 8), off);
    const __m256i d0 = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), m0, a0, nullptr, 1);
    const __m256i d1 = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), m1, a1, nullptr, 1);
    lo[0] = _mm512_cvtph_ps(_mm256_set_m128i(_mm256_cvtepi32_epi16(d1), _mm256_cvtepi32_epi16(d0)));
    if (hi != nullptr) {
      hi[0] = _mm512_cvtph_ps(_mm256_set_m128i(_mm256_cvtepi32_epi16(_mm256_srli_epi32(d1, 16)),
                                               _mm256_cvtepi32_epi16(_mm256_srli_epi32(d0, 16))));
    }
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

  // Walsh-Hadamard butterflies of distance H (< 16) inside one register:
  // lower lane j gets x[j] + x[j+H], upper lane j+H gets x[j] - x[j+H], each
  // as one fma(x, +-1, partner): the product is exact, so the single rounding
  // is that of the reference's add_rn / sub_rn (IEEE a - b is a + (-b)).
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
    const __m512 sign = _mm512_mask_blend_ps(upper, _mm512_set1_ps(1.0f), _mm512_set1_ps(-1.0f));
    return _mm512_fmadd_ps(x, sign, partner);
  }

  // One step of the binary search behind Codebook::bucketize (sorted
  // midpoints): idx += step where y >= mids[idx + step - 1].
  static void bucket_step(const F* y, const Table& mids, int step, __m512i* idx) {
    const __m512 m = _mm512_permutexvar_ps(_mm512_add_epi32(idx[0], _mm512_set1_epi32(step - 1)), mids.t);
    idx[0] = _mm512_mask_add_epi32(idx[0], _mm512_cmp_ps_mask(y[0], m, _CMP_GE_OQ), idx[0], _mm512_set1_epi32(step));
  }

  // core::value_code on 16 lanes: 0 when !(t >= 0) (NaN too), levels when
  // t >= levels, else trunc(t). min_ps returns its second operand on NaN.
  static __m512i value_codes(const F* t, int levels) {
    const __m512i c = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_set1_ps(static_cast<float>(levels)), t[0]));
    return _mm512_max_epi32(c, _mm512_setzero_si512());
  }

  // Minimum / maximum of 16 lanes (no NaN); which of equal values wins is
  // unspecified, so callers recheck zero results (+0 vs -0).
  static float min16(const F* v) { return _mm512_reduce_min_ps(v[0]); }

  // 16 dword codes -> 16 bytes.
  static __m128i codes_to_bytes(const Codes& c) { return _mm512_cvtepi32_epi8(c); }

  // 4 floats -> 4 fp16 with round-to-nearest-even (callers clamp first).
  static __m128i to_half4(__m128 x) { return _mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
};
#endif

}  // namespace turboquant::cpu::simd
