// Isa<xsimd::fma3<xsimd::avx2>>: AVX2, FMA and F16C (see isa_traits.hpp).
// Only defined when the translation unit is compiled for it.
#pragma once

#include "isa_traits.hpp"

namespace turboquant::cpu::simd {

#if XSIMD_WITH_FMA3_AVX2 && defined(__F16C__)
template <>
struct Isa<xsimd::fma3<xsimd::avx2>> {
  using arch = xsimd::fma3<xsimd::avx2>;
  using F = xsimd::batch<float, arch>;
  static constexpr int kRegs = 2;
  static constexpr int kWidth = 8;
  static constexpr int kHeadBlock = 4;  // 16 ymm registers only
  static constexpr int kVectorRegisters = 16;  // what register blocks of the hot loops may fill
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
  // For records i < n: the fp16 at recs[i] + offset into lane i of lo and,
  // with hi, the fp16 2 bytes later into hi's; lanes >= n are 0. 2-byte
  // copies (the AVX-512 version gathers; on the AVX2 machines measured the
  // AoS decode stays within its target with the copies, PERFORMANCE.md).
  static void record_halves(const std::uint8_t* const* recs, int n, std::int64_t offset, F* lo, F* hi) {
    alignas(32) std::uint16_t l[16] = {};
    alignas(32) std::uint16_t h[16] = {};
    for (int i = 0; i < n; ++i) {
      std::memcpy(&l[i], recs[i] + offset, 2);
      if (hi != nullptr) std::memcpy(&h[i], recs[i] + offset + 2, 2);
    }
    half16(l, lo);
    if (hi != nullptr) half16(h, hi);
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

  // The 16 lanes of v combined by `op` in the contract's tree order: lane j with
  // j+8 (the two registers), then j+4, j+2, j+1; the result is lane 0.
  template <class Op>
  static float tree16(const F* v, Op op) {
    __m256 x = op(v[0], v[1]);                                 // j, j+8
    x = op(x, _mm256_permute2f128_ps(x, x, 1));                // j, j+4
    x = op(x, _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));  // j, j+2
    x = op(x, _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));  // j, j+1
    return _mm256_cvtss_f32(x);
  }

  static float max16(const F* v) {
    return tree16(v, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); });
  }

  static float reduce_one(const F* v) {
    return tree16(v, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
  }

  template <int H>
  static __m256 butterfly(__m256 x) {
    __m256 partner;
    __m256 sign;
    if constexpr (H == 1) {
      partner = _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1));
      sign = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    } else if constexpr (H == 2) {
      partner = _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2));
      sign = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    } else {
      partner = _mm256_permute2f128_ps(x, x, 1);
      sign = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    }
    return _mm256_fmadd_ps(x, sign, partner);
  }

  static void bucket_step(const F* y, const Table& mids, int step, Codes* idx) {
    const __m256i add = _mm256_set1_epi32(step - 1);
    const Codes probe{_mm256_add_epi32(idx->lo, add), _mm256_add_epi32(idx->hi, add)};
    F m[2];
    lookup<4>(probe, mids, m);
    const __m256i inc = _mm256_set1_epi32(step);
    idx->lo = _mm256_add_epi32(idx->lo, _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(y[0], m[0], _CMP_GE_OQ)), inc));
    idx->hi = _mm256_add_epi32(idx->hi, _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(y[1], m[1], _CMP_GE_OQ)), inc));
  }

  static Codes value_codes(const F* t, int levels) {
    const __m256 l = _mm256_set1_ps(static_cast<float>(levels));
    return {_mm256_max_epi32(_mm256_cvttps_epi32(_mm256_min_ps(l, t[0])), _mm256_setzero_si256()),
            _mm256_max_epi32(_mm256_cvttps_epi32(_mm256_min_ps(l, t[1])), _mm256_setzero_si256())};
  }

  static float min16(const F* v) {
    return tree16(v, [](__m256 a, __m256 b) { return _mm256_min_ps(a, b); });
  }

  static __m128i codes_to_bytes(const Codes& c) {
    const __m256i w = _mm256_packs_epi32(c.lo, c.hi);  // per 128-bit half: lo0-3 hi0-3 | lo4-7 hi4-7
    const __m256i words = _mm256_permute4x64_epi64(w, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  }

  static __m128i to_half4(__m128 x) { return _mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
};
#endif

}  // namespace turboquant::cpu::simd
