// How the fast decode's tile step reads one staged tile (fast_loader.cuh
// fills it): a lane's key words of tokens g and g + 8, its value words of
// tokens 2c, 2c + 1, 2c + 8, 2c + 9, the tokens' value scale and zero and key
// norms. One reader per cache layout, fixed per lane for every tile:
//   SoaStage      records at 16-byte aligned rows (wide loads), metadata in
//                 the stage's own region, norms with the correction folded in.
//   AosStage<P>   slots at 2-byte aligned places of their rows (4-byte loads,
//                 funnel-shifted by the phase P = 0 or 2 of the slots, the same
//                 for every slot of a block when the token stride is a
//                 multiple of 4), metadata read from the slot, and the key
//                 norm corrected per token (core::decoded_key_norm) from the
//                 squared norm of the key's fp16 centroids, summed on the
//                 tensor cores by the tile step (FastTraits::kNormFromSquares;
//                 the table's centroids carry the centroid scale s, so the
//                 sum is taken times 1 / s^2). The fp16 centroids' own norm
//                 (their squares rounded to fp16, summed in fp32) makes the
//                 scores' key directions unit to fp16 rounding: on the sharp
//                 vLLM case a05, rel L2 1.08e-3 against 1.17e-3 with the fp32
//                 centroids' squares (measured on the H200, before the
//                 centroid scale, with the exact Gram diagonal).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "fast_loader.cuh"
#include "mma_utils.cuh"
#include "turboquant/core/quantize.hpp"

namespace turboquant::cuda::detail {

template <class T>
struct SoaStage {
  int g, c;

  __device__ __forceinline__ void load_keys(const std::uint8_t* st, std::uint32_t (&kw)[2][T::kKeyWords]) const {
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + g * T::kRowBytes + c * T::kKeyChunk, kw[0]);
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + (g + 8) * T::kRowBytes + c * T::kKeyChunk, kw[1]);
  }
  __device__ __forceinline__ void load_values(const std::uint8_t* st, std::uint32_t (&vw)[4][T::kValueWords]) const {
    const std::uint8_t* vbase = st + T::kKeyBytes + g * T::kValueChunk;
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c) * T::kRowBytes, vw[0]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 1) * T::kRowBytes, vw[1]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 8) * T::kRowBytes, vw[2]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 9) * T::kRowBytes, vw[3]);
  }
  // The tile's metadata in the stage: field i's value of token t at meta[i * kTile + t].
  __device__ __forceinline__ const __half* meta(const std::uint8_t* st) const {
    return reinterpret_cast<const __half*>(st + T::kTile * T::kRowBytes);
  }
  __device__ __forceinline__ void value_meta(const std::uint8_t* st, float& scale0, float& scale1, float& zero0,
                                             float& zero1) const {
    constexpr int kScale = T::field(core::MetaField::kValueScale) * T::kTile;
    constexpr int kZero = T::field(core::MetaField::kValueZero) * T::kTile;
    const __half* m = meta(st);
    scale0 = __half2float(m[kScale + g]);
    scale1 = __half2float(m[kScale + g + 8]);
    zero0 = __half2float(m[kZero + g]);
    zero1 = __half2float(m[kZero + g + 8]);
  }
  // The stored norms (SoA folds the correction in at store).
  __device__ __forceinline__ void key_norms(const std::uint8_t* st, const float (&)[4], float& n0, float& n1) const {
    constexpr int kNorm = T::field(core::MetaField::kKeyNorm) * T::kTile;
    const __half* m = meta(st);
    n0 = __half2float(m[kNorm + g]);
    n1 = __half2float(m[kNorm + g + 8]);
  }
};

// Words of codes from the stage: W little-endian words of the code bytes that
// start at stage byte `off`, whose phase off % 4 is kPhase (0 or 2) or, for
// kRuntimePhase, read from off. kStride is the bytes between the words in the
// stage (4: one contiguous chunk; more: interleaved words of one lane).
inline constexpr int kRuntimePhase = -1;
template <int W, int kStride, int kPhase>
__device__ __forceinline__ void load_stage_words(const std::uint8_t* st, int off, std::uint32_t (&w)[W]) {
  const int phase = kPhase == kRuntimePhase ? (off & 3) : kPhase;
  const std::uint32_t* p = reinterpret_cast<const std::uint32_t*>(st + (off - phase));
  if constexpr (kPhase == 0) {
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = p[i * (kStride / 4)];
  } else if constexpr (kStride == 4) {
    std::uint32_t raw[W + 1];
#pragma unroll
    for (int i = 0; i <= W; ++i) raw[i] = p[i];
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = __funnelshift_r(raw[i], raw[i + 1], 8 * phase);
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = __funnelshift_r(p[i * (kStride / 4)], p[i * (kStride / 4) + 1], 8 * phase);
  }
}

template <class T, int kPhase>
class AosStage {
 public:
  static_assert(kPhase == 0 || kPhase == 2, "AoS slots are 2-byte aligned");

  // Lane (g, c) of the warp; `correct`: the format corrects the norm at decode;
  // `squares_unscale`: 1 / the pair table's centroid scale squared.
  __device__ __forceinline__ AosStage(const core::BlockLayout& l, int kv_head, int g, int c, bool correct,
                                      float squares_unscale)
      : g_(g), c_(c), correct_(correct), squares_unscale_(squares_unscale) {
    slot_g_ = aos_slot_in_stage<T>(l, kv_head, g);
    slot_v0_ = aos_slot_in_stage<T>(l, kv_head, 2 * c);
    slot_v1_ = aos_slot_in_stage<T>(l, kv_head, 2 * c + 1);
  }

  __device__ __forceinline__ void load_keys(const std::uint8_t* st, std::uint32_t (&kw)[2][T::kKeyWords]) const {
    if constexpr (T::kKeyWordsInterleaved) {
      const int off = slot_g_ + 4 * c_;
      load_stage_words<T::kKeyWords, 16, kPhase>(st, off, kw[0]);
      load_stage_words<T::kKeyWords, 16, kPhase>(st, off + 8 * T::kRowBytes, kw[1]);
    } else {
      constexpr int kChunkPhase = T::kKeyChunk % 4 == 0 ? kPhase : kRuntimePhase;
      const int off = slot_g_ + c_ * T::kKeyChunk;
      load_stage_words<T::kKeyWords, 4, kChunkPhase>(st, off, kw[0]);
      load_stage_words<T::kKeyWords, 4, kChunkPhase>(st, off + 8 * T::kRowBytes, kw[1]);
    }
  }
  __device__ __forceinline__ void load_values(const std::uint8_t* st, std::uint32_t (&vw)[4][T::kValueWords]) const {
    constexpr int kVoff = T::kValueOffset;
    if constexpr (T::kValueWordsInterleaved) {
      constexpr int kWordPhase = (kPhase + kVoff) & 3;
      load_value_rows<32, kWordPhase>(st, kVoff + 4 * g_, vw);
    } else {
      constexpr int kChunkPhase = T::kValueChunk % 4 == 0 ? ((kPhase + kVoff) & 3) : kRuntimePhase;
      load_value_rows<4, kChunkPhase>(st, kVoff + g_ * T::kValueChunk, vw);
    }
  }
  __device__ __forceinline__ void value_meta(const std::uint8_t* st, float& scale0, float& scale1, float& zero0,
                                             float& zero1) const {
    constexpr int kScale = T::aos_field_offset(core::MetaField::kValueScale);
    constexpr int kZero = T::aos_field_offset(core::MetaField::kValueZero);
    scale0 = half_at(st, slot_g_ + kScale);
    scale1 = half_at(st, slot_g_ + 8 * T::kRowBytes + kScale);
    zero0 = half_at(st, slot_g_ + kZero);
    zero1 = half_at(st, slot_g_ + 8 * T::kRowBytes + kZero);
  }
  // sq: the tile step's squared centroid norms (fast_tile), sq[0] of token g
  // and sq[2] of token g + 8 in every lane. Lanes c = 0, 2 finish token g,
  // lanes c = 1, 3 token g + 8 (one correction per lane).
  __device__ __forceinline__ void key_norms(const std::uint8_t* st, const float (&sq)[4], float& n0, float& n1) const {
    constexpr unsigned kAll = 0xffffffffu;
    const bool upper = c_ & 1;
    constexpr int kNorm = T::aos_field_offset(core::MetaField::kKeyNorm);
    const float stored = half_at(st, slot_g_ + (upper ? 8 * T::kRowBytes : 0) + kNorm);
    const float sum = (upper ? sq[2] : sq[0]) * squares_unscale_;
    const float mine = core::decoded_key_norm(stored, sum, correct_, [](float x) { return rsqrtf(x); });
    n0 = __shfl_sync(kAll, mine, 4 * g_);
    n1 = __shfl_sync(kAll, mine, 4 * g_ + 1);
  }

 private:
  static __device__ __forceinline__ float half_at(const std::uint8_t* st, int off) {
    return __half2float(*reinterpret_cast<const __half*>(st + off));
  }
  // Rows 2c, 2c + 1, 2c + 8, 2c + 9 at byte `off` of their slots.
  template <int kStride, int kWordPhase>
  __device__ __forceinline__ void load_value_rows(const std::uint8_t* st, int off,
                                                  std::uint32_t (&vw)[4][T::kValueWords]) const {
    load_stage_words<T::kValueWords, kStride, kWordPhase>(st, slot_v0_ + off, vw[0]);
    load_stage_words<T::kValueWords, kStride, kWordPhase>(st, slot_v1_ + off, vw[1]);
    load_stage_words<T::kValueWords, kStride, kWordPhase>(st, slot_v0_ + 8 * T::kRowBytes + off, vw[2]);
    load_stage_words<T::kValueWords, kStride, kWordPhase>(st, slot_v1_ + 8 * T::kRowBytes + off, vw[3]);
  }

  int g_, c_;
  bool correct_;
  float squares_unscale_;
  int slot_g_;   // slot of token g in the stage (token g + 8: + 8 rows, same phase)
  int slot_v0_;  // slot of token 2c
  int slot_v1_;  // slot of token 2c + 1
};

// fn(stage) with the stage reader of kv_head's tiles: SoaStage, or AosStage
// of the phase of the head's slots (every slot of the head has the phase of its
// first: the host sends token strides that are not a multiple of 4 to the
// strict kernel).
template <class T, class F>
__device__ __forceinline__ void with_stage(const DecodeParams& p, int kv_head, int g, int c, F&& fn) {
  if constexpr (T::kAos) {
    const core::BlockLayout l = T::layout(p.layout);
    const bool correct = p.layout.format.norm_corrected_at_decode();
    if (aos_slot_offset(l, kv_head, 0) & 2) {
      fn(AosStage<T, 2>(l, kv_head, g, c, correct, p.fast_squares_unscale));
    } else {
      fn(AosStage<T, 0>(l, kv_head, g, c, correct, p.fast_squares_unscale));
    }
  } else {
    fn(SoaStage<T>{g, c});
  }
}

}  // namespace turboquant::cuda::detail
