// The per-tile phases of the strict kernels (strict_decode.cuh describes the
// arithmetic): the scores of a staged tile (dot16 lanes, the contract's tree,
// core::key_score), the softmax fold of core::softmax_fold_tile and the value
// accumulation, each in the order of the golden model. Both strict kernels
// (one warp per split, or several warps per split) call these.
#pragma once

#include <cstdint>

#include "strict_stage.cuh"
#include "turboquant/core/reduction.hpp"

namespace turboquant::cuda::detail {

// The key elements of dot16 lane j in one staged row, d = j + 16 k for k = 0,
// 1, ...: their centroids (Lloyd-Max codes; the rotated basis) or FP8 values.
// Element d's field starts at bit KB d + shift_bits of the row (shift_bits:
// the row's shift in bits, 0 for unshifted rows). A k-step moves it by 16 KB bits: a
// whole number of words for 4- and 8-bit keys, so the word and the bit within
// it are fixed per (row, lane) and set up once here, leaving one load at a
// constant offset per element; 3-bit fields move by 48 bits, which is whole
// words (3) every two steps, so even and odd steps get a base each.
template <int KB, core::Fp8Format F8>
struct StrictKeyLane {
  static constexpr int kStepBits = 16 * KB;
  const std::uint32_t* even;  // the word holding step 0's field (3-bit: step 2m's is even[3m])
  const std::uint32_t* odd;   // 3-bit: the word holding step 1's field (step 2m + 1's is odd[3m])
  int even_bit;               // the field's first bit within its word (4-bit: a rotation, below)
  int odd_bit;

  __device__ __forceinline__ StrictKeyLane(const std::uint32_t* row, int j, int shift_bits) {
    const int b0 = KB * j + shift_bits;
    even = row + (b0 >> 5);
    if constexpr (KB == 4) {
      // Rotated right by this the code lands at bits 2..5, already times 4: one
      // funnel shift and one mask form the byte offset of its centroid.
      even_bit = (b0 + 30) & 31;
    } else {
      even_bit = b0 & 31;
    }
    if constexpr (KB == 3) {
      const int b1 = b0 + kStepBits;
      odd = row + (b1 >> 5);
      odd_bit = b1 & 31;
    }
  }

  // Element j + 16 k (k a compile-time constant after unrolling).
  __device__ __forceinline__ float key(int k, const float* centroids) const {
    if constexpr (KB == 8) {
      const std::uint32_t byte = (even[4 * k] >> even_bit) & 0xffu;
      if constexpr (F8 == core::Fp8Format::kE4b15) {
        // e4b15 -> fp16 is a shift (core::fp8_e4b15_to_fp16_bits), fp16 -> fp32 exact.
        return __half2float(__ushort_as_half(core::fp8_e4b15_to_fp16_bits(static_cast<std::uint8_t>(byte))));
      } else {
        // e4m3 -> fp16 -> fp32 is exact, so this equals core::fp8_e4m3_to_float for
        // every non-NaN byte; a NaN key only feeds fma_rn, whose NaN result is
        // the canonical NaN either way.
        return unpack_half2(e4m3x2_to_half2(byte)).x;
      }
    } else if constexpr (KB == 4) {
      const std::uint32_t w = even[2 * k];
      const std::uint32_t offset = __funnelshift_r(w, w, even_bit) & 0x3cu;
      return *reinterpret_cast<const float*>(reinterpret_cast<const std::uint8_t*>(centroids) + offset);
    } else {
      static_assert(KB == 3, "Lloyd-Max keys of 3 or 4 bits, or FP8");
      const std::uint32_t* w = (k % 2 == 0 ? even : odd) + 3 * (k / 2);
      const int bit = k % 2 == 0 ? even_bit : odd_bit;
      return centroids[__funnelshift_r(w[0], w[1], bit) & 7u];
    }
  }
};

// One level of the dot16 tree over the 16 lanes of a half warp (xor `mask`).
// N >= 2: reduce-scatter (each lane keeps half of its N values); N == 1: both
// partners compute the sum.
template <int N>
__device__ __forceinline__ void tree_level(float* a, int lane, int mask) {
  if constexpr (N >= 2) {
    const bool upper = (lane & mask) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float send = upper ? a[i] : a[i + N / 2];
      const float keep = upper ? a[i + N / 2] : a[i];
      a[i] = core::add_rn(keep, __shfl_xor_sync(0xffffffffu, send, mask));
    }
  } else {
    a[0] = core::add_rn(a[0], __shfl_xor_sync(0xffffffffu, a[0], mask));
  }
}

// Where lane `lane`'s results of the score tree land: values [vbase, vbase +
// kKeep) of the V = 8H (token i, head g) sums (index i * H + g); `writer` is
// false for the duplicate of an all-reduce level.
template <int H>
struct TreeSlots {
  static constexpr int kValues = 8 * H;
  static constexpr int kKeep = kValues >= 16 ? kValues / 16 : 1;
  int vbase = 0;
  bool writer = true;
  __device__ explicit TreeSlots(int lane) {
    int nv = kValues;
#pragma unroll
    for (int m = 8; m >= 1; m >>= 1) {
      if (nv >= 2) {
        if (lane & m) vbase += nv / 2;
        nv /= 2;
      } else if (lane & m) {
        writer = false;
      }
    }
  }
};

// The token (i of tokens 2i + tg) whose sums lane j (= lane & 15) keeps after
// the score tree of H heads (TreeSlots<H>): j >> 1 for every H, for all kKeep
// values, as after the tree of one value per token (H = 1). So the lane that
// writes a token's scores also holds that token's c . c (norm correction).
constexpr bool tree_token_of_lane_is(int heads, int j, int token) {
  int vbase = 0;
  int nv = 8 * heads;
  for (int m = 8; m >= 1; m >>= 1) {
    if (nv >= 2) {
      if (j & m) vbase += nv / 2;
      nv /= 2;
    }
  }
  const int keep = 8 * heads >= 16 ? 8 * heads / 16 : 1;
  for (int i = 0; i < keep; ++i) {
    if ((vbase + i) / heads != token) return false;
  }
  return true;
}
constexpr bool score_and_norm_trees_agree() {
  for (int heads : {1, 2, 4}) {
    for (int j = 0; j < 16; ++j) {
      if (!tree_token_of_lane_is(heads, j, j >> 1) || !tree_token_of_lane_is(1, j, j >> 1)) return false;
    }
  }
  return true;
}
static_assert(score_and_norm_trees_agree(), "the norm tree must leave each token where its scores are");

// Scores of one staged tile for H heads (one warp): lane (j = lane & 15, tg =
// lane >> 4) is dot16 lane j of tokens 2i + tg; the tree, then core::key_score
// with the token's norm into scores[head][t]: the stored norm (meta[t].z), or
// when the format corrects it at decode (AoS _nc) core::decoded_key_norm of it
// and dot16(c, c), whose lanes accumulate beside q . c and go through the same
// tree. Rows past the tile's end hold stale bytes; their sums are never used.
template <class Rec, int H, class Shift>
__device__ __forceinline__ void strict_tile_scores(const Shift& shift, const std::uint32_t (*raw)[Rec::kRow],
                                                   const float (&qr)[H][Rec::kFormat.head_dim / 16],
                                                   const float* centroids, const core::Format& f, const float4* meta,
                                                   const TreeSlots<H>& slots, int lane,
                                                   float (*scores)[core::kTileTokens]) {
  constexpr int KB = Rec::kFormat.key_bits;
  constexpr int kSteps = Rec::kFormat.head_dim / 16;
  constexpr int V = 8 * H;
  constexpr bool kMayCorrect = Rec::kFormat.aos() && !Rec::kFormat.fp8_keys();
  const int j = lane & 15;
  const int tg = lane >> 4;
  float s[V];
#pragma unroll
  for (int v = 0; v < V; ++v) s[v] = 0.0f;
  float cc[kMayCorrect ? 8 : 1];  // dot16 lane j of c . c, token 2i + tg
#pragma unroll
  for (int i = 0; i < (kMayCorrect ? 8 : 1); ++i) cc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const StrictKeyLane<KB, Rec::kFormat.fp8_format> keys(raw[2 * i + tg], j, shift.bits(meta[2 * i + tg]));
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const float key = keys.key(k, centroids);
#pragma unroll
      for (int g = 0; g < H; ++g) s[i * H + g] = core::fma_rn(qr[g][k], key, s[i * H + g]);
      if constexpr (kMayCorrect) cc[i] = core::fma_rn(key, key, cc[i]);
    }
  }
  tree_level<V>(s, lane, 8);
  tree_level<(V >= 4 ? V / 2 : 1)>(s, lane, 4);
  tree_level<(V >= 8 ? V / 4 : 1)>(s, lane, 2);
  tree_level<(V >= 16 ? V / 8 : 1)>(s, lane, 1);
  [[maybe_unused]] bool corrects = false;
  if constexpr (kMayCorrect) {
    corrects = f.norm_corrected_at_decode();  // warp-uniform
    if (corrects) {  // cc[0] becomes dot16(c, c) of token 2 (j >> 1) + tg
      tree_level<8>(cc, lane, 8);
      tree_level<4>(cc, lane, 4);
      tree_level<2>(cc, lane, 2);
      tree_level<1>(cc, lane, 1);
    }
  }
  if (slots.writer) {
    // Every value this lane keeps belongs to one token, 2 (j >> 1) + tg
    // (score_and_norm_trees_agree), so its norm is decoded once.
    const int t = 2 * (j >> 1) + tg;
    float norm = meta[t].z;
    if constexpr (kMayCorrect) norm = core::decoded_key_norm(norm, cc[0], corrects);
#pragma unroll
    for (int i = 0; i < TreeSlots<H>::kKeep; ++i) {
      const int v = slots.vbase + i;
      scores[v % H][t] = core::key_score(f, s[i], norm);
    }
  }
}

// core::softmax_fold_tile for head hs = lane % H, in its order: every lane of
// head hs runs the max and sum chains; the exponentials are spread over the
// lanes (probs[t][head]). Returns alpha for head hs. The caller synchronizes the
// warp before and after (scores in, probs out).
template <int H>
__device__ __forceinline__ float strict_softmax_tile(const float (*scores)[core::kTileTokens],
                                                     float (*probs)[H], int n, int lane, core::SoftmaxState& state) {
  constexpr int kT = core::kTileTokens;
  const int hs = lane % H;
  float tile_max = scores[hs][0];
#pragma unroll
  for (int t = 1; t < kT; ++t) {
    if (t < n) tile_max = core::max_f(tile_max, scores[hs][t]);
  }
  const float new_max = core::max_f(state.max, tile_max);
  const float ref = core::softmax_reference(new_max);
  const float alpha = core::softmax_weight(state.max, ref);
#pragma unroll
  for (int k = 0; k < (16 * H >= 32 ? 16 * H / 32 : 1); ++k) {
    const int t = lane / H + k * (32 / H);
    if (t < n) probs[t][hs] = core::softmax_weight(scores[hs][t], ref);
  }
  __syncwarp();
  float sum = core::mul_rn(state.sum, alpha);
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t < n) sum = core::add_rn(sum, probs[t][hs]);
  }
  state.max = new_max;
  state.sum = sum;
  return alpha;
}

// The value phase of one tile for E consecutive dims starting at first_dim and
// all H heads: core::rescale by each head's alpha (held by lane g of the warp),
// then core::accumulate token by token, the value from core::dequant_value.
// The codes start at bit value_bit of a row (plus the row's shift, Rec's
// kShiftedRows), value_bit = Rec::kValueOffset * 8 plus a multiple of VB * E.
template <int E, int H, class Rec, class Shift>
__device__ __forceinline__ void strict_tile_values(const Shift& shift, float (&acc)[H][E], float alpha,
                                                   const std::uint32_t (*raw)[Rec::kRow], const float4* meta,
                                                   const float (*probs)[H], int n, int value_bit) {
  constexpr int VB = Rec::kFormat.value_bits;
  constexpr int kField = VB * E;
  constexpr bool kShifted = Rec::kShiftedRows;
  // A field of 8 or 16 bits that starts at a multiple of its size is whole
  // bytes, and stays so in shifted rows (shifts are whole 16-bit units): 4-bit
  // codes, 2 or 4 dims a lane, take one 1- or 2-byte load at the (shifted)
  // byte address, no shift arithmetic. Other fields are cut from the words
  // around them (row_bits).
  constexpr bool kWholeBytes = (kField == 8 || kField == 16) && Rec::kValueOffset * 8 % kField == 0;
#pragma unroll
  for (int g = 0; g < H; ++g) {
    const float a = __shfl_sync(0xffffffffu, alpha, g);
#pragma unroll
    for (int e = 0; e < E; ++e) acc[g][e] = core::rescale(acc[g][e], a);
  }
#pragma unroll 4
  for (int t = 0; t < n; ++t) {
    const float4 m = meta[t];
    float pr[H];
#pragma unroll
    for (int g = 0; g < H; ++g) pr[g] = probs[t][g];
    std::uint32_t bits;
    if constexpr (kWholeBytes) {
      const std::uint8_t* field =
          reinterpret_cast<const std::uint8_t*>(raw[t]) + (value_bit >> 3) + shift.bytes(m);
      bits = kField == 16 ? *reinterpret_cast<const std::uint16_t*>(field) : *field;
    } else {
      bits = row_bits<kField, kShifted>(raw[t], value_bit + shift.bits(m));
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      // float(code) formed exactly as (2^23 + code) - 2^23 (no quarter-rate I2F).
      const float code = __fsub_rn(__uint_as_float(0x4b000000u | ((bits >> (VB * e)) & ((1u << VB) - 1))), 8388608.0f);
      const float v = core::dequant_value(code, m.x, m.y);
#pragma unroll
      for (int g = 0; g < H; ++g) acc[g][e] = core::accumulate(acc[g][e], pr[g], v);
    }
  }
}

// The query of this lane's dot16 lane j for H heads (dims j, j + 16, ...), from
// the prepared query in shared memory; heads past `heads` are zero.
template <int D, int H>
__device__ __forceinline__ void load_strict_query(const float (*q)[D], int heads, int j, float (&qr)[H][D / 16]) {
#pragma unroll
  for (int g = 0; g < H; ++g) {
#pragma unroll
    for (int k = 0; k < D / 16; ++k) qr[g][k] = g < heads ? q[g][j + 16 * k] : 0.0f;
  }
}

}  // namespace turboquant::cuda::detail
