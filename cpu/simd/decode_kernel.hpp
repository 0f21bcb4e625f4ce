// The decode work item and the split merge, templated on the xsimd arch and
// instantiated once per ISA (isa_avx512.cpp, isa_avx2.cpp). Every step is the
// scalar reference's step (cpu/reference/decode_ref.cpp) evaluated on several
// lanes at once with the same operations in the same order per lane:
//
//   keys    per token, all query heads of the KV head from one decode of its
//           bytes: dot16 lanes as fused multiply-adds chunk by chunk (one V16
//           per head), stored per (head, token) and reduced 16 tokens at a
//           time by the contract's tree (Isa::reduce_tile);
//   softmax per tile and head: scores, the tile max, the ref/alpha logic of
//           core::softmax_fold_tile, exp2 on 16 tokens at once, the sum added
//           in token order;
//   values  per dim chunk: acc * alpha, then one fma per token in token order;
//           a token's 16 possible values fma(code, scale, zero) are computed
//           once into a table and looked up by code.
//
// The per-tile steps (metadata, FP8 keys of the scalar decode, the norm
// correction, the value tables, fold_tile) are also the rows item's
// (decode_rows.hpp), which runs them on keys and values decoded once for
// several query rows.
#pragma once

#include <cmath>
#include <cstdint>

#include "decode_tile_ops.hpp"
#include "exp2_simd.hpp"
#include "kernels.hpp"

namespace turboquant::cpu::simd {

template <class A>
struct DecodeKernels : DecodeTileOps<A> {
  using Ops = DecodeTileOps<A>;
  using typename Ops::F;
  using typename Ops::S;
  using Ops::R;
  using Ops::W;
  using Ops::for_head_blocks;

  // Scratch of one work item (decode_scratch_floats(group) floats).
  struct Scratch {
    float* red;      // [group][16 slots][kSlotFloats]: dot16 lanes per (head, token)
    float* scores;   // [group][16]
    float* probs;    // [group][16]
    float* alpha;    // [gpad]
    float* diff;     // [gpad]: old max - ref, exp2'd into alpha
    float* refs;     // [gpad]
    float* exact;    // [gpad]: 1 where the scalar fallback folded the tile
    float* run_max;  // [group]
    float* run_sum;  // [group]
    float* vt;       // [16 tokens][16 codes]: dequantized value tables
    float* kbuf;     // [head_dim]
    float* red_self;  // [16 slots][kSlotFloats]: dot16 lanes of c·c per token (AoS norm correction)
    Scratch(float* base, int group) {
      const int gpad = (group + 15) / 16 * 16;
      red = base;
      scores = red + group * kTile * 16;
      probs = scores + group * kTile;
      alpha = probs + group * kTile;
      diff = alpha + gpad;
      refs = diff + gpad;
      exact = refs + gpad;
      run_max = exact + gpad;
      run_sum = run_max + group;
      vt = run_sum + group;
      kbuf = vt + 16 * kTile;
      red_self = kbuf + core::kMaxHeadDim;
      for (int g = 0; g < gpad; ++g) diff[g] = 0.0f;
    }
  };

  // core::softmax_fold_tile for every head of the tile: scores (dot times
  // norm) from the reduced lanes, the tile max, alpha, the probabilities and
  // their sum in token order.
  template <int KeyBits>
  static void fold_tile(const Scratch& sc, int group, int n, const F* norms, const F* lanes) {
    bool any_exact = false;
    const F count(static_cast<float>(n));
    for (int g = 0; g < group; ++g) {
      F x[R];
      S::reduce_tile(sc.red + g * kTile * S::kSlotFloats, x);
      float* sg = sc.scores + g * kTile;
      for (int r = 0; r < R; ++r) {
        if constexpr (KeyBits != 8) x[r] = x[r] * norms[r];  // core::key_score
        x[r].store_unaligned(sg + r * W);
      }
      bool nan = false;
      for (int r = 0; r < R; ++r) nan |= xsimd::any(xsimd::isnan(x[r]) && (lanes[r] < count));
      sc.exact[g] = nan ? 1.0f : 0.0f;
      if (nan) {  // NaN scores make the max order-dependent: fold this head as the reference does
        core::SoftmaxState st{sc.run_max[g], sc.run_sum[g]};
        sc.alpha[g] = fallback::fold_tile(st, sg, n, sc.probs + g * kTile);
        sc.run_max[g] = st.max;
        sc.run_sum[g] = st.sum;
        any_exact = true;
        continue;
      }
      // Without NaNs the maximum is one value whatever the order; only the
      // sign of a zero maximum may differ from the sequential max_f, and every
      // use of a maximum (x - max into exp2, max + log2(sum)) gives the same
      // bits for +0 and -0.
      F masked[R];
      for (int r = 0; r < R; ++r) masked[r] = xsimd::select(lanes[r] < count, x[r], F(-core::kInf));
      const float new_max = core::max_f(sc.run_max[g], S::max16(masked));
      sc.refs[g] = core::softmax_reference(new_max);
      sc.diff[g] = core::softmax_exponent(sc.run_max[g], sc.refs[g]);
      sc.run_max[g] = new_max;
    }
    for (int g0 = 0; g0 < group; g0 += W) {  // alpha = core::softmax_weight(old max, ref), all heads at once
      alignas(64) float e[W];
      exp2_tq<A>(F::load_unaligned(sc.diff + g0)).store_aligned(e);
      for (int g = g0; g < g0 + W && g < group; ++g) {
        if (!(any_exact && sc.exact[g] != 0.0f)) sc.alpha[g] = e[g - g0];
      }
    }
    for (int g = 0; g < group; ++g) {
      if (any_exact && sc.exact[g] != 0.0f) continue;
      const float* sg = sc.scores + g * kTile;
      float* pg = sc.probs + g * kTile;
      const F ref(sc.refs[g]);
      for (int r = 0; r < R; ++r) {
        const F x = xsimd::select(lanes[r] < count, F::load_unaligned(sg + r * W), F(-core::kInf));
        exp2_tq<A>(x - ref).store_unaligned(pg + r * W);  // core::softmax_weight(score, ref)
      }
      float sum = sc.run_sum[g] * sc.alpha[g];
      for (int t = 0; t < n; ++t) sum = sum + pg[t];
      sc.run_sum[g] = sum;
    }
  }

  // What every tile of an item uses: the key centroids and the value codes
  // 0..2^bits-1 (each stored twice for 3 bits: the lookups' fourth index bit
  // is garbage there), and the lane indices 0..15 that mask a short tile.
  template <int KeyBits, int VBits>
  struct TileConstants {
    typename S::Table key_table;
    F codes_f[R];
    F lanes[R];
    explicit TileConstants(const DecodeProblem& p) {
      alignas(64) float lut[16];
      alignas(64) float code_values[16];
      alignas(64) float lane_index[16];
      for (int i = 0; i < 16; ++i) {
        lut[i] = KeyBits == 8 ? 0.0f : p.codebook->centroids[i & ((1 << (KeyBits == 8 ? 4 : KeyBits)) - 1)];
        code_values[i] = static_cast<float>(i & ((1 << VBits) - 1));
        lane_index[i] = static_cast<float>(i);
      }
      key_table = S::table(lut);
      for (int r = 0; r < R; ++r) {
        codes_f[r] = F::load_aligned(code_values + r * W);
        lanes[r] = F::load_aligned(lane_index + r * W);
      }
    }
  };

  // A tile's metadata: key norms (Lloyd-Max keys) and value scales and zeros.
  template <int KeyBits>
  static void tile_meta(const TileWalker<A>& walker, const TileRecords& t, F* norms, float* vscale, float* vzero) {
    F scales[R], zeros[R];
    walker.template meta<KeyBits != 8>(t, norms, scales, zeros);
    for (int r = 0; r < R; ++r) scales[r].store_aligned(vscale + r * W);
    for (int r = 0; r < R; ++r) zeros[r].store_aligned(vzero + r * W);
  }

  // Bit i set: FP8 key i takes the scalar decode, where the vector one does
  // not apply: e4m3 NaN codes (never written by an encoder), and every e4b15 key.
  template <int KeyBits>
  static std::uint32_t scalar_keys(const core::Format& f, const TileRecords& t) {
    std::uint32_t mask = 0;
    if constexpr (KeyBits == 8) {
      if (f.fp8_format != core::Fp8Format::kE4m3) return (1u << t.n) - 1u;
      for (int i = 0; i < t.n; ++i) mask |= S::fp8_has_nan(t.key[i], f.head_dim) ? 1u << i : 0u;
    }
    return mask;
  }

  // Slots n..15 of a short last tile: defined (ignored) lanes.
  static void clear_slots(float* red, int heads, int n) {
    for (int i = n; i < kTile; ++i) {
      for (int g = 0; g < heads; ++g) {
        float* at = red + (g * kTile + S::slot_of(i)) * S::kSlotFloats;
        for (int j = 0; j < S::kSlotFloats; ++j) at[j] = 0.0f;
      }
    }
  }

  // core::corrected_key_norm lane by lane: norm * (1 / sqrt(sum c^2 + 1e-16)),
  // from the reduced lanes of dot16(c, c).
  static void correct_norms(const float* red_self, F* norms) {
    F sum_sq[R];
    S::reduce_tile(red_self, sum_sq);
    for (int r = 0; r < R; ++r) norms[r] = norms[r] * (F(1.0f) / xsimd::sqrt(sum_sq[r] + F(core::kCorrectionEpsilon)));
  }

  // Each token's dequantized values fma(code, scale, zero) as a 16-entry table.
  static void value_tables(const F* codes_f, const float* vscale, const float* vzero, int n, float* vt) {
    for (int i = 0; i < n; ++i) {
      const F scale(vscale[i]);
      const F zero(vzero[i]);
      for (int r = 0; r < R; ++r) fma_rn<A>(codes_f[r], scale, zero).store_unaligned(vt + 16 * i + r * W);
    }
  }

  static void start_states(const Scratch& sc, int group) {
    for (int g = 0; g < group; ++g) {
      sc.run_max[g] = -core::kInf;
      sc.run_sum[g] = 0.0f;
    }
  }
  static void store_states(const DecodeProblem& p, const Scratch& sc, int b, int h, int s) {
    for (int g = 0; g < p.group; ++g) {
      float* ml = p.max_sum(b, h * p.group + g, s);
      ml[0] = sc.run_max[g];
      ml[1] = sc.run_sum[g];
    }
  }

  template <int KeyBits, int VBits>
  static void item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
    const core::TokenRange range = p.token_range(b, s);
    if (range.empty()) return;
    const core::Format& f = p.layout.format;
    const int dims = f.head_dim;
    const int group = p.group;
    const int value_offset = f.value_record_offset();
    // AoS _nc: the norm correction at decode, from dot16(c, c) of each key.
    const bool correct = KeyBits != 8 && f.norm_corrected_at_decode();
    const std::int64_t acc_stride = p.partials.acc_row_stride();  // between the group's query heads
    float* part = p.acc(b, h * group, s);
    const float* queries = p.query(b, h * group);
    const Scratch sc(scratch, group);
    start_states(sc, group);
    const TileConstants<KeyBits, VBits> tc(p);

    // Tiles are walked (and prefetched into L2) two tiles ahead of use.
    TileWalker<A> walker(p, b, h, range);
    TileRecords tiles[3];
    walker.next(tiles[0]);
    walker.next(tiles[1]);
    for (int k = 0; tiles[k % 3].n > 0; ++k) {
      const TileRecords& t = tiles[k % 3];
      walker.next(tiles[(k + 2) % 3]);
      const int n = t.n;
      F norms[R];
      alignas(64) float vscale[kTile];
      alignas(64) float vzero[kTile];
      tile_meta<KeyBits>(walker, t, norms, vscale, vzero);

      // Keys: dot16 lanes of every (head, token) from one decode of the key.
      const std::uint32_t scalar = scalar_keys<KeyBits>(f, t);
      if (scalar == 0) {
        for_head_blocks(group, [&]<int HB>(int g0) {
          const float* q = queries + std::int64_t{g0} * dims;
          float* red = sc.red + g0 * kTile * S::kSlotFloats;
          if (correct && g0 == 0) {
            Ops::template keys_tile<KeyBits, HB, true>(t.key, n, tc.key_table, q, dims, red, sc.red_self);
          } else {
            Ops::template keys_tile<KeyBits, HB>(t.key, n, tc.key_table, q, dims, red);
          }
        });
      } else {
        for (int i = 0; i < n; ++i) {
          const bool nan = (scalar >> i) & 1u;
          if (nan) fallback::decode_fp8(f.fp8_format, t.key[i], dims, sc.kbuf);
          for_head_blocks(group, [&]<int HB>(int g0) {
            float* red = sc.red + g0 * kTile * S::kSlotFloats;
            const float* q = queries + std::int64_t{g0} * dims;
            if (nan) {
              const float* key = sc.kbuf;
              Ops::template dot_floats<HB>(&key, i, q, dims, red);
            } else {
              Ops::template dot_token<KeyBits, HB>(t.key[i], tc.key_table, q, dims, red, S::slot_of(i));
            }
          });
        }
      }
      clear_slots(sc.red, group, n);
      clear_slots(sc.red_self, 1, n);
      if (correct) correct_norms(sc.red_self, norms);

      fold_tile<KeyBits>(sc, group, n, norms, tc.lanes);

      // Values: looked up in each token's table, dim chunk by dim chunk.
      const std::uint8_t* vals[kTile];
      for (int i = 0; i < n; ++i) vals[i] = t.key[i] + value_offset;
      value_tables(tc.codes_f, vscale, vzero, n, sc.vt);
      for_head_blocks(group, [&]<int HB>(int g0) {
        Ops::template values_tile<HB>(typename Ops::template CodedValues<VBits>{vals, sc.vt}, n, dims,
                                      sc.probs + g0 * kTile, sc.alpha + g0, part + g0 * acc_stride, acc_stride,
                                      k == 0);
      });
    }
    store_states(p, sc, b, h, s);
  }

  // Split merge for one query row (decode_reference's merge): the non-empty
  // splits are a prefix (split_range), their weights exp2(m_s - M) are
  // computed 16 at a time, then the accumulators are summed in split order
  // with the dims of a block in registers. A sink (§7) starts M at its logit
  // and the sum at its weight; the LSE then has its own sink-free weights.
  static void merge_row(const DecodeProblem& p, int b, int q_head, float* out, float* lse) {
    const int dims = p.head_dim();
    const int used = used_splits(p.seq_lens[b], p.num_splits);
    float lse_max = -core::kInf;
    for (int s = 0; s < used; ++s) lse_max = core::merge_max(lse_max, p.max_sum(b, q_head, s)[0]);
    if (lse_max == -core::kInf) {  // no tokens (with a sink too: acc 0, sum 1)
      for (int d = 0; d < dims; d += W) F(0.0f).store_unaligned(out + d);
      *lse = -core::kInf;
      return;
    }
    const bool has_sink = p.sink_logits != nullptr;
    const float sink = has_sink ? p.sink_logits[q_head] : 0.0f;
    float merged_max = has_sink ? sink : -core::kInf;
    for (int s = 0; s < used; ++s) merged_max = core::merge_max(merged_max, p.max_sum(b, q_head, s)[0]);
    alignas(64) float w[1024 + 16];  // num_splits <= 1024
    weights(p, b, q_head, used, merged_max, w);
    float sum = has_sink ? core::merge_weight(sink, merged_max) : 0.0f;
    for (int s = 0; s < used; ++s) sum = core::merge_add(sum, w[s], p.max_sum(b, q_head, s)[1]);
    constexpr int kBlock = 8;  // registers of accumulators
    for (int d0 = 0; d0 < dims; d0 += kBlock * W) {
      const int nb = (dims - d0) / W < kBlock ? (dims - d0) / W : kBlock;
      F acc[kBlock];
      for (int j = 0; j < kBlock; ++j) acc[j] = F(0.0f);
      for (int s = 0; s < used; ++s) {
        const float* part = p.acc(b, q_head, s) + d0;
        const F ws(w[s]);
        for (int j = 0; j < nb; ++j) acc[j] = fma_rn<A>(ws, F::load_unaligned(part + j * W), acc[j]);
      }
      const F sv(sum);
      for (int j = 0; j < nb; ++j) (acc[j] / sv).store_unaligned(out + d0 + j * W);  // core::finalize_output
    }
    if (has_sink) {  // the LSE of the attended scores: the sink-free merge of (max_s, sum_s)
      weights(p, b, q_head, used, lse_max, w);
      sum = 0.0f;
      for (int s = 0; s < used; ++s) sum = core::merge_add(sum, w[s], p.max_sum(b, q_head, s)[1]);
    }
    *lse = core::lse_of_log2(lse_max, fallback::log2(sum));
  }

  // w[s] = exp2(m_s - merged_max) for the used splits (core::merge_weight), zero-padded to W.
  static void weights(const DecodeProblem& p, int b, int q_head, int used, float merged_max, float* w) {
    for (int s = 0; s < used; ++s) w[s] = core::merge_exponent(p.max_sum(b, q_head, s)[0], merged_max);
    for (int s = used; s < used + W; ++s) w[s] = 0.0f;
    for (int s = 0; s < used; s += W) exp2_tq<A>(F::load_aligned(w + s)).store_aligned(w + s);
  }

  // The decode item for the call's format.
  static void decode_item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
    core::visit_bits(p.layout.format, [&]<int KB, int VB>() { item<KB, VB>(p, b, h, s, scratch); });
  }
};

}  // namespace turboquant::cpu::simd
