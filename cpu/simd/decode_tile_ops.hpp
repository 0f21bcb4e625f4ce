// The hot loops of a decode work item, per tile of 16 tokens: the key dot
// products of all query heads of a KV head (from one decode of each key, or
// from keys decoded to floats once for several query rows: decode_rows.hpp)
// and the value accumulation (from the value codes, or from decoded values).
// Templated on the xsimd arch; the head count per register block (HB) is a
// template parameter so that accumulators stay in registers.
#pragma once

#include <cstdint>

#include "decode_tiles.hpp"
#include "isa_traits.hpp"

// Fixed-count loops over heads and registers are unrolled so that their
// accumulator arrays live in registers.
#define TQ_UNROLL _Pragma("GCC unroll 16")

namespace turboquant::cpu::simd {

template <class A>
struct DecodeTileOps {
  using S = Isa<A>;
  using F = typename S::F;
  static constexpr int R = S::kRegs;
  static constexpr int W = S::kWidth;
  static_assert(kTile == 16, "the tile reduction serves 16 tokens");

  // body.template operator()<HB>(g0) for consecutive head blocks covering [0, group).
  template <class Body>
  static void for_head_blocks(int group, Body&& body) {
    int g0 = 0;
    for (; g0 + S::kHeadBlock <= group; g0 += S::kHeadBlock) body.template operator()<S::kHeadBlock>(g0);
    if (g0 < group) rest_block<1>(group - g0, g0, body);
  }
  template <int HB, class Body>
  static void rest_block(int rest, int g0, Body& body) {
    if constexpr (HB < S::kHeadBlock) {
      if (rest == HB) {
        body.template operator()<HB>(g0);
      } else {
        rest_block<HB + 1>(rest, g0, body);
      }
    }
  }

  // dims [16c, 16c+16) of a key: centroids by code, or FP8 values.
  template <int KeyBits>
  static void key_chunk(const std::uint8_t* key, int c, const typename S::Table& tab, F* out) {
    if constexpr (KeyBits == 8) {
      S::fp8(key + 16 * c, out);
    } else {
      S::template lookup<KeyBits>(S::template codes<KeyBits>(key, c), tab, out);
    }
  }

  // use(c, k) for each chunk c of one key's dims, k = key_chunk's values, in
  // chunk order; with SelfDot also the lanes of dot16(k, k), the centroid sum
  // of squares of the decode-time norm correction (AoS, core::decode_key_norm),
  // from the same decode, stored at tile slot `slot` of red_self.
  template <int KeyBits, bool SelfDot, class Use>
  static void for_key_chunks(const std::uint8_t* key, const typename S::Table& tab, int dims, float* red_self,
                             int slot, Use&& use) {
    F self[R];
    TQ_UNROLL
    for (int r = 0; r < R; ++r) self[r] = F(0.0f);
    for (int c = 0; c < dims / 16; ++c) {
      F k[R];
      key_chunk<KeyBits>(key, c, tab, k);
      use(c, k);
      if constexpr (SelfDot) {
        TQ_UNROLL
        for (int r = 0; r < R; ++r) self[r] = fma_rn<A>(k[r], k[r], self[r]);
      }
    }
    if constexpr (SelfDot) S::store_dot(red_self + slot * S::kSlotFloats, self);
  }

  // dot16 lanes of one token's key against HB prepared queries (one chain of
  // fused multiply-adds per lane, chunk by chunk, from +0), stored at the
  // token's tile slot; with SelfDot the lanes of dot16(c, c) at red_self's slot.
  template <int KeyBits, int HB, bool SelfDot = false>
  static void dot_token(const std::uint8_t* key, const typename S::Table& tab, const float* q, int dims, float* red,
                        int slot, float* red_self = nullptr) {
    F acc[HB][R];
    TQ_UNROLL
    for (int g = 0; g < HB; ++g)
      TQ_UNROLL
      for (int r = 0; r < R; ++r) acc[g][r] = F(0.0f);
    for_key_chunks<KeyBits, SelfDot>(key, tab, dims, red_self, slot, [&](int c, const F* k) {
      TQ_UNROLL
      for (int g = 0; g < HB; ++g)
        TQ_UNROLL
        for (int r = 0; r < R; ++r)
          acc[g][r] = fma_rn<A>(F::load_unaligned(q + std::int64_t{g} * dims + 16 * c + r * W), k[r], acc[g][r]);
    });
    TQ_UNROLL
    for (int g = 0; g < HB; ++g) S::store_dot(red + (g * kTile + slot) * S::kSlotFloats, acc[g]);
  }

  // Where value_chunk gets token t's values of dims [16c, 16c+16): looked up
  // from its codes in the token's 16-entry table fma(code, scale, zero)
  // (vt + 16 t), or loaded from values already decoded that way.
  template <int VBits>
  struct CodedValues {
    const std::uint8_t* const* vals;  // [n] value codes of each token
    const float* vt;                  // [n][16]
    void operator()(int t, int c, F* v) const {
      S::template lookup_mem<VBits>(S::template codes<VBits>(vals[t], c), vt + 16 * t, v);
    }
  };
  struct DecodedValues {
    const float* const* rows;  // [n] pointers to head_dim floats, 64-byte aligned
    void operator()(int t, int c, F* v) const {
      TQ_UNROLL
      for (int r = 0; r < R; ++r) v[r] = F::load_aligned(rows[t] + 16 * c + r * W);
    }
  };

  // Dims [16c, 16c + 16 NC): acc[g] = acc * alpha[g], then fma(p[g][t], v_t,
  // acc) for t < n in token order, per element. On a split's first tile the
  // accumulator is +0 and alpha = exp2(-inf - ref) = 0, so acc * alpha is +0
  // without reading it. NC chunks at once give NC * HB independent fma chains
  // (one chain per accumulator either way, so the same bits).
  template <int HB, int NC, class Values>
  static void value_chunk(Values values, int n, int c, const float* probs, const float* alpha, float* acc,
                          std::int64_t acc_stride, bool first) {
    F a[NC][HB][R];
    TQ_UNROLL
    for (int j = 0; j < NC; ++j)
      TQ_UNROLL
      for (int g = 0; g < HB; ++g)
        TQ_UNROLL
        for (int r = 0; r < R; ++r) {
          a[j][g][r] =
              first ? F(0.0f) : F::load_unaligned(acc + g * acc_stride + 16 * (c + j) + r * W) * F(alpha[g]);
        }
    for (int t = 0; t < n; ++t) {
      F v[NC][R];
      TQ_UNROLL
      for (int j = 0; j < NC; ++j) values(t, c + j, v[j]);
      TQ_UNROLL
      for (int g = 0; g < HB; ++g) {
        const F prob(probs[g * kTile + t]);
        TQ_UNROLL
        for (int j = 0; j < NC; ++j)
          TQ_UNROLL
          for (int r = 0; r < R; ++r) a[j][g][r] = fma_rn<A>(prob, v[j][r], a[j][g][r]);
      }
    }
    TQ_UNROLL
    for (int j = 0; j < NC; ++j)
      TQ_UNROLL
      for (int g = 0; g < HB; ++g)
        TQ_UNROLL
        for (int r = 0; r < R; ++r) a[j][g][r].store_unaligned(acc + g * acc_stride + 16 * (c + j) + r * W);
  }

  // A key decoded to head_dim floats at `out` (key_chunk's values), with
  // dot16(c, c)'s lanes at slot `slot` of red_self when SelfDot.
  template <int KeyBits, bool SelfDot>
  static void decode_key(const std::uint8_t* key, const typename S::Table& tab, int dims, float* out, float* red_self,
                         int slot) {
    for_key_chunks<KeyBits, SelfDot>(key, tab, dims, red_self, slot, [&](int c, const F* k) {
      TQ_UNROLL
      for (int r = 0; r < R; ++r) k[r].store_aligned(out + 16 * c + r * W);
    });
  }

  // One tile's keys for HB heads, and one tile's values: out of line (and
  // flattened inside) so that each hot loop gets its own register allocation.
  template <int KeyBits, int HB, bool SelfDot = false>
  [[gnu::noinline, gnu::flatten]] static void keys_tile(const std::uint8_t* const* keys, int n,
                                                        const typename S::Table& tab, const float* q, int dims,
                                                        float* red, float* red_self = nullptr) {
    for (int i = 0; i < n; ++i) {
      dot_token<KeyBits, HB, SelfDot>(keys[i], tab, q, dims, red, S::slot_of(i), red_self);
    }
  }
  // The same for keys already decoded to fp32 (FP8 keys holding NaN codes;
  // the keys of decode_rows' ring): keys[0 .. TB - 1], the tile's tokens i0 ..
  // i0 + TB - 1. Each chunk's HB query vectors are loaded once for the TB
  // keys, so a fused multiply-add needs (TB + HB) / (TB * HB) loads instead of
  // (1 + HB) / HB; each (token, head) lane keeps its own chain over the chunks
  // in chunk order, so TB does not change the bits.
  template <int HB, int TB = 1>
  static void dot_floats(const float* const* keys, int i0, const float* q, int dims, float* red) {
    F acc[TB][HB][R];
    TQ_UNROLL
    for (int t = 0; t < TB; ++t)
      TQ_UNROLL
      for (int g = 0; g < HB; ++g)
        TQ_UNROLL
        for (int r = 0; r < R; ++r) acc[t][g][r] = F(0.0f);
    for (int c = 0; c < dims / 16; ++c) {
      F qv[HB][R];
      TQ_UNROLL
      for (int g = 0; g < HB; ++g)
        TQ_UNROLL
        for (int r = 0; r < R; ++r) qv[g][r] = F::load_unaligned(q + std::int64_t{g} * dims + 16 * c + r * W);
      TQ_UNROLL
      for (int t = 0; t < TB; ++t) {
        TQ_UNROLL
        for (int r = 0; r < R; ++r) {
          const F kv = F::load_unaligned(keys[t] + 16 * c + r * W);
          TQ_UNROLL
          for (int g = 0; g < HB; ++g) acc[t][g][r] = fma_rn<A>(qv[g][r], kv, acc[t][g][r]);
        }
      }
    }
    TQ_UNROLL
    for (int t = 0; t < TB; ++t)
      TQ_UNROLL
      for (int g = 0; g < HB; ++g) S::store_dot(red + (g * kTile + S::slot_of(i0 + t)) * S::kSlotFloats, acc[t][g]);
  }

  // The same for keys already decoded to floats (decode_key), one pointer per
  // token: blocks of as many tokens as the accumulators, queries and a key
  // chunk leave registers for.
  template <int HB>
  [[gnu::noinline, gnu::flatten]] static void decoded_keys_tile(const float* const* keys, int n, const float* q,
                                                                int dims, float* red) {
    constexpr int kRegisters = S::kVectorRegisters;
    constexpr int TB = 4 * HB * R + HB * R + R <= kRegisters ? 4 : (2 * HB * R + HB * R + R <= kRegisters ? 2 : 1);
    int i = 0;
    if constexpr (TB > 1) {
      for (; i + TB <= n; i += TB) dot_floats<HB, TB>(keys + i, i, q, dims, red);
    }
    for (; i < n; ++i) dot_floats<HB>(keys + i, i, q, dims, red);
  }
  template <int HB, class Values>
  [[gnu::noinline, gnu::flatten]] static void values_tile(Values values, int n, int dims, const float* probs,
                                                          const float* alpha, float* acc, std::int64_t acc_stride,
                                                          bool first) {
    // Two chunks at once where their accumulators, values and a probability fit
    // the vector registers.
    constexpr int NC = 2 * HB * R + 2 * R + 1 <= S::kVectorRegisters ? 2 : 1;
    int c = 0;
    for (; c + NC <= dims / 16; c += NC) value_chunk<HB, NC>(values, n, c, probs, alpha, acc, acc_stride, first);
    for (; c < dims / 16; ++c) value_chunk<HB, 1>(values, n, c, probs, alpha, acc, acc_stride, first);
  }
};

}  // namespace turboquant::cpu::simd
