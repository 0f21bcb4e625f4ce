// The decode work item and the split merge, templated on the xsimd arch and
// instantiated once per ISA (isa_avx512.cpp, isa_avx2.cpp). Every step is the
// scalar reference's step (cpu/reference/decode_ref.cpp) evaluated on several
// lanes at once with the same operations in the same order per lane:
//
//   keys    per token, all query heads of the KV head from one decode of its
//           bytes: dot16 lanes as fused multiply-adds chunk by chunk (one V16
//           per head), stored per (head, token) and reduced 16 tokens at a
//           time by the contract's tree (Isa::reduce_tile);
//   softmax per tile and head: scores, sequential max, the ref/alpha logic of
//           core::softmax_fold_tile, exp2 on 16 tokens at once, the sum added
//           in token order;
//   values  per dim chunk: acc * alpha, then one fma per token in token order;
//           a token's 16 possible values fma(code, scale, zero) are computed
//           once into a table and looked up by code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "exp2_simd.hpp"
#include "isa_traits.hpp"
#include "kernels.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cpu::simd {

template <class A>
struct DecodeKernels {
  using S = Isa<A>;
  using F = typename S::F;
  static constexpr int R = S::kRegs;
  static constexpr int W = S::kWidth;
  static constexpr int kTile = core::kTileTokens;
  static constexpr int kPrefetchTokens = 32;
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

  // dot16 lanes of NT tokens' keys against HB prepared queries (one chain of
  // fused multiply-adds per lane, chunk by chunk, from +0), stored at the
  // tokens' tile slots. NT > 1 only interleaves independent chains.
  template <int KeyBits, int HB, int NT>
  static void dot_tokens(const std::uint8_t* const* key, const typename S::Table& tab, const float* q, int dims,
                         float* red, const int* slot) {
    F acc[NT][HB][R];
    for (int u = 0; u < NT; ++u)
      for (int g = 0; g < HB; ++g)
        for (int r = 0; r < R; ++r) acc[u][g][r] = F(0.0f);
    for (int c = 0; c < dims / 16; ++c) {
      F k[NT][R];
      for (int u = 0; u < NT; ++u) key_chunk<KeyBits>(key[u], c, tab, k[u]);
      for (int g = 0; g < HB; ++g)
        for (int r = 0; r < R; ++r) {
          const F qv = F::load_unaligned(q + std::int64_t{g} * dims + 16 * c + r * W);
          for (int u = 0; u < NT; ++u) acc[u][g][r] = fma_rn<A>(qv, k[u][r], acc[u][g][r]);
        }
    }
    for (int u = 0; u < NT; ++u)
      for (int g = 0; g < HB; ++g) S::store_dot(red + (g * kTile + slot[u]) * S::kSlotFloats, acc[u][g]);
  }

  // The same for a key already decoded to fp32 (FP8 keys holding NaN codes).
  template <int HB>
  static void dot_floats(const float* key, const float* q, int dims, float* red, int slot) {
    F acc[HB][R];
    for (int g = 0; g < HB; ++g)
      for (int r = 0; r < R; ++r) acc[g][r] = F(0.0f);
    for (int c = 0; c < dims / 16; ++c)
      for (int g = 0; g < HB; ++g)
        for (int r = 0; r < R; ++r) {
          const F kv = F::load_unaligned(key + 16 * c + r * W);
          acc[g][r] = fma_rn<A>(F::load_unaligned(q + std::int64_t{g} * dims + 16 * c + r * W), kv, acc[g][r]);
        }
    for (int g = 0; g < HB; ++g) S::store_dot(red + (g * kTile + slot) * S::kSlotFloats, acc[g]);
  }

  // For NC dim chunks from c: acc[g] = acc * alpha[g], then fma(p[g][t], v_t,
  // acc) for t < n in token order. NC > 1 only interleaves independent chains.
  template <int VBits, int HB, int NC>
  static void value_chunks(const std::uint8_t* const* vals, int n, int c0, const float* vt, const float* probs,
                           const float* alpha, float* acc, std::int64_t acc_stride) {
    F a[NC][HB][R];
    for (int u = 0; u < NC; ++u)
      for (int g = 0; g < HB; ++g)
        for (int r = 0; r < R; ++r)
          a[u][g][r] = F::load_unaligned(acc + g * acc_stride + 16 * (c0 + u) + r * W) * F(alpha[g]);
    for (int t = 0; t < n; ++t) {
      F v[NC][R];
      for (int u = 0; u < NC; ++u)
        S::template lookup_mem<VBits>(S::template codes<VBits>(vals[t], c0 + u), vt + 16 * t, v[u]);
      for (int g = 0; g < HB; ++g) {
        const F prob(probs[g * kTile + t]);
        for (int u = 0; u < NC; ++u)
          for (int r = 0; r < R; ++r) a[u][g][r] = fma_rn<A>(prob, v[u][r], a[u][g][r]);
      }
    }
    for (int u = 0; u < NC; ++u)
      for (int g = 0; g < HB; ++g)
        for (int r = 0; r < R; ++r) a[u][g][r].store_unaligned(acc + g * acc_stride + 16 * (c0 + u) + r * W);
  }

  template <int KeyBits, int VBits>
  static void item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
    const core::TokenRange range = core::split_range(p.seq_lens[b], p.num_splits, s);
    if (range.empty()) return;
    const core::BlockLayout& l = p.layout;
    const core::Format& f = l.format;
    const int dims = f.head_dim;
    const int group = p.group;
    const std::int64_t pf = p.partial_floats();
    float* part = p.partial(b, h, s, 0);
    const float* queries = p.query(b, h * group);
    const std::int32_t* block_row = p.block_table + std::int64_t{b} * p.max_blocks_per_seq;

    // Scratch (at most decode_scratch_floats(group)).
    const int gpad = (group + 15) / 16 * 16;
    float* red = scratch;                   // [group][16 slots][kSlotFloats]
    float* scores = red + group * 16 * 16;  // [group][16]
    float* probs = scores + group * kTile;  // [group][16]
    float* alpha = probs + group * kTile;   // [gpad]
    float* diff = alpha + gpad;             // [gpad]: old max - ref, exp2'd into alpha
    float* refs = diff + gpad;              // [gpad]
    float* exact = refs + gpad;             // [gpad]: 1 where the tile was folded by the scalar fallback
    float* run_max = exact + gpad;          // [group]
    float* run_sum = run_max + group;       // [group]
    float* vt = run_sum + group;            // [16 tokens][16 codes]
    float* kbuf = vt + 16 * kTile;          // [head_dim]

    for (int g = 0; g < group; ++g) {
      for (int d = 0; d < dims; ++d) part[g * pf + d] = 0.0f;
      run_max[g] = -core::kInf;
      run_sum[g] = 0.0f;
    }
    for (int g = 0; g < gpad; ++g) diff[g] = 0.0f;

    // Key centroids (3-bit: stored twice) and the value codes 0..2^bits-1 (3-bit: twice).
    alignas(64) float lut[16];
    alignas(64) float code_values[16];
    alignas(64) float lane_index[16];
    for (int i = 0; i < 16; ++i) {
      if constexpr (KeyBits != 8) lut[i] = p.codebook->centroids[i & ((1 << KeyBits) - 1)];
      else lut[i] = 0.0f;
      code_values[i] = static_cast<float>(i & ((1 << VBits) - 1));
      lane_index[i] = static_cast<float>(i);
    }
    const typename S::Table key_table = S::table(lut);
    F codes_f[R];
    F lanes[R];
    for (int r = 0; r < R; ++r) {
      codes_f[r] = F::load_aligned(code_values + r * W);
      lanes[r] = F::load_aligned(lane_index + r * W);
    }

    const std::int64_t rec_stride = std::int64_t{l.num_kv_heads} * f.data_bytes();
    const std::int64_t key_off = l.key_data_offset(0, h);
    const int key_bytes = f.key_data_bytes();
    const std::int64_t norm_off = KeyBits == 8 ? 0 : l.meta_field_offset(0, h, core::MetaField::kKeyNorm);
    const std::int64_t scale_off = l.meta_field_offset(0, h, core::MetaField::kValueScale);
    const std::int64_t zero_off = l.meta_field_offset(0, h, core::MetaField::kValueZero);

    int blk = range.begin / l.block_size;
    int slot = range.begin % l.block_size;
    const std::uint8_t* block = p.cache + l.block_base(block_row[blk]);

    // Software prefetch, kPrefetchTokens ahead of use: one head's records are
    // Hk records apart inside blocks the table scatters, a pattern the
    // hardware prefetchers do not follow, and decode would otherwise wait on
    // DRAM latency for every token.
    const int bs = l.block_size;
    const int data_bytes = f.data_bytes();
    int pf_token = range.begin;
    int pf_blk = blk;
    int pf_slot = slot;
    const std::uint8_t* pf_block = block;
    const auto prefetch = [](const std::uint8_t* a) { _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0); };
    const auto prefetch_until = [&](int end_token) {
      if (end_token > range.end) end_token = range.end;
      for (; pf_token < end_token; ++pf_token) {
        const std::uint8_t* rec = pf_block + key_off + pf_slot * rec_stride;
        for (int off = 0; off < data_bytes; off += 64) prefetch(rec + off);
        prefetch(rec + data_bytes - 1);
        if ((pf_slot & 15) == 0 || pf_token == range.begin) {  // the metadata of this and the next 15 slots
          const int last = pf_slot + 15 < bs ? pf_slot + 15 : bs - 1;
          for (const std::int64_t off : {norm_off, scale_off, zero_off}) {
            prefetch(pf_block + off + 2 * pf_slot);
            prefetch(pf_block + off + 2 * last);
          }
        }
        if (++pf_slot == bs && pf_token + 1 < range.end) {
          pf_slot = 0;
          pf_block = p.cache + l.block_base(block_row[++pf_blk]);
        }
      }
    };
    prefetch_until(range.begin + kPrefetchTokens);

    for (int tile = range.begin; tile < range.end; tile += kTile) {
      const int n = range.end - tile < kTile ? range.end - tile : kTile;
      prefetch_until(tile + kTile + kPrefetchTokens);

      // Where each token's records and metadata are: one block (the common
      // case, read directly) or several.
      const std::uint8_t* keys[kTile];
      const std::uint8_t* vals[kTile];
      F norms[R];
      alignas(64) float vscale[kTile];
      alignas(64) float vzero[kTile];
      {
        alignas(32) std::uint16_t meta[3][kTile];
        const std::uint16_t* mp[3] = {meta[0], meta[1], meta[2]};
        if (slot + n <= bs) {
          const std::uint8_t* rec = block + key_off + slot * rec_stride;
          for (int i = 0; i < n; ++i, rec += rec_stride) {
            keys[i] = rec;
            vals[i] = rec + key_bytes;
          }
          const std::int64_t offs[3] = {norm_off, scale_off, zero_off};
          for (int m = (KeyBits == 8 ? 1 : 0); m < 3; ++m) {
            const std::uint8_t* src = block + offs[m] + 2 * slot;
            if (n == kTile) {
              mp[m] = reinterpret_cast<const std::uint16_t*>(src);
            } else {
              std::memcpy(meta[m], src, 2 * std::size_t(n));
              for (int i = n; i < kTile; ++i) meta[m][i] = 0;
            }
          }
          slot += n;
          if (slot == bs && tile + n < range.end) {
            slot = 0;
            block = p.cache + l.block_base(block_row[++blk]);
          }
        } else {
          for (int i = 0; i < n; ++i) {
            keys[i] = block + key_off + slot * rec_stride;
            vals[i] = keys[i] + key_bytes;
            if constexpr (KeyBits != 8) std::memcpy(&meta[0][i], block + norm_off + 2 * slot, 2);
            std::memcpy(&meta[1][i], block + scale_off + 2 * slot, 2);
            std::memcpy(&meta[2][i], block + zero_off + 2 * slot, 2);
            if (++slot == bs && tile + i + 1 < range.end) {
              slot = 0;
              block = p.cache + l.block_base(block_row[++blk]);
            }
          }
          for (int i = n; i < kTile; ++i) meta[0][i] = meta[1][i] = meta[2][i] = 0;
        }
        if constexpr (KeyBits != 8) S::half16(mp[0], norms);
        F tmp[R];
        S::half16(mp[1], tmp);
        for (int r = 0; r < R; ++r) tmp[r].store_aligned(vscale + r * W);
        S::half16(mp[2], tmp);
        for (int r = 0; r < R; ++r) tmp[r].store_aligned(vzero + r * W);
      }

      // Keys: dot16 lanes of every (head, token) from one decode of the key,
      // S::kKeyTokens tokens at a time.
      for (int i = 0; i < n;) {
        if (KeyBits == 8 && S::fp8_has_nan(keys[i], dims)) {
          fallback::decode_fp8(keys[i], dims, kbuf);
          const int at = S::slot_of(i);
          for_head_blocks(group, [&]<int HB>(int g0) {
            dot_floats<HB>(kbuf, queries + std::int64_t{g0} * dims, dims, red + g0 * kTile * S::kSlotFloats, at);
          });
          ++i;
          continue;
        }
        constexpr int NT = S::kKeyTokens;
        if (NT > 1 && i + NT <= n && !(KeyBits == 8 && S::fp8_has_nan(keys[i + 1], dims))) {
          int at[NT];
          for (int u = 0; u < NT; ++u) at[u] = S::slot_of(i + u);
          for_head_blocks(group, [&]<int HB>(int g0) {
            dot_tokens<KeyBits, HB, NT>(keys + i, key_table, queries + std::int64_t{g0} * dims, dims,
                                        red + g0 * kTile * S::kSlotFloats, at);
          });
          i += NT;
          continue;
        }
        const int at = S::slot_of(i);
        for_head_blocks(group, [&]<int HB>(int g0) {
          dot_tokens<KeyBits, HB, 1>(keys + i, key_table, queries + std::int64_t{g0} * dims, dims,
                                     red + g0 * kTile * S::kSlotFloats, &at);
        });
        ++i;
      }
      for (int i = n; i < kTile; ++i) {  // a short last tile: defined (ignored) lanes
        for (int g = 0; g < group; ++g) {
          float* at = red + (g * kTile + S::slot_of(i)) * S::kSlotFloats;
          for (int j = 0; j < S::kSlotFloats; ++j) at[j] = 0.0f;
        }
      }

      // Softmax fold (core::softmax_fold_tile), first the scores, max and ref per head ...
      bool any_exact = false;
      const F count(static_cast<float>(n));
      for (int g = 0; g < group; ++g) {
        F sc[R];
        S::reduce_tile(red + g * kTile * S::kSlotFloats, sc);
        float* sg = scores + g * kTile;
        for (int r = 0; r < R; ++r) {
          if constexpr (KeyBits != 8) sc[r] = sc[r] * norms[r];  // core::key_score
          sc[r].store_unaligned(sg + r * W);
        }
        bool nan = false;
        for (int r = 0; r < R; ++r) nan |= xsimd::any(xsimd::isnan(sc[r]) && (lanes[r] < count));
        exact[g] = nan ? 1.0f : 0.0f;
        if (nan) {  // NaN scores make the max order-dependent: fold this head exactly as the reference does
          core::SoftmaxState st{run_max[g], run_sum[g]};
          alpha[g] = fallback::fold_tile(st, sg, n, probs + g * kTile);
          run_max[g] = st.max;
          run_sum[g] = st.sum;
          any_exact = true;
          continue;
        }
        // Without NaNs the maximum is one value whatever the order; only the
        // sign of a zero maximum may differ from the sequential max_f, and
        // every use of a maximum (x - max into exp2, max + log2(sum)) gives
        // the same bits for +0 and -0.
        F masked[R];
        for (int r = 0; r < R; ++r) masked[r] = xsimd::select(lanes[r] < count, sc[r], F(-core::kInf));
        const float tile_max = S::max16(masked);
        const float new_max = core::max_f(run_max[g], tile_max);
        refs[g] = (new_max == -core::kInf) ? 0.0f : new_max;  // all -inf: avoid -inf - -inf
        diff[g] = run_max[g] - refs[g];
        run_max[g] = new_max;
      }
      // ... then alpha = exp2(old max - ref) for all heads at once ...
      for (int g0 = 0; g0 < group; g0 += W) {
        alignas(64) float e[W];
        exp2_tq<A>(F::load_unaligned(diff + g0)).store_aligned(e);
        for (int g = g0; g < g0 + W && g < group; ++g) {
          if (!(any_exact && exact[g] != 0.0f)) alpha[g] = e[g - g0];
        }
      }
      // ... then the probabilities of 16 tokens at once and their sum in token order.
      for (int g = 0; g < group; ++g) {
        if (any_exact && exact[g] != 0.0f) continue;
        const float* sg = scores + g * kTile;
        float* pg = probs + g * kTile;
        const F ref(refs[g]);
        for (int r = 0; r < R; ++r) {
          const F sc = xsimd::select(lanes[r] < count, F::load_unaligned(sg + r * W), F(-core::kInf));
          exp2_tq<A>(sc - ref).store_unaligned(pg + r * W);
        }
        float sum = run_sum[g] * alpha[g];
        for (int t = 0; t < n; ++t) sum = sum + pg[t];
        run_sum[g] = sum;
      }

      // Values: each token's dequantized values fma(code, scale, zero) as a table ...
      for (int t = 0; t < n; ++t) {
        const F sc(vscale[t]);
        const F zr(vzero[t]);
        for (int r = 0; r < R; ++r) fma_rn<A>(codes_f[r], sc, zr).store_unaligned(vt + 16 * t + r * W);
      }
      // ... looked up by code, S::kValueChunks dim chunks at a time.
      const int chunks = dims / 16;
      int c = 0;
      for (; c + S::kValueChunks <= chunks; c += S::kValueChunks) {
        for_head_blocks(group, [&]<int HB>(int g0) {
          value_chunks<VBits, HB, S::kValueChunks>(vals, n, c, vt, probs + g0 * kTile, alpha + g0, part + g0 * pf, pf);
        });
      }
      for (; c < chunks; ++c) {
        for_head_blocks(group, [&]<int HB>(int g0) {
          value_chunks<VBits, HB, 1>(vals, n, c, vt, probs + g0 * kTile, alpha + g0, part + g0 * pf, pf);
        });
      }
    }
    for (int g = 0; g < group; ++g) {
      part[g * pf + dims] = run_max[g];
      part[g * pf + dims + 1] = run_sum[g];
    }
  }

  // Split merge for one query row (reference: decode_reference's loop over s).
  static void merge_row(const DecodeProblem& p, int b, int q_head, float* out, float* lse) {
    const int dims = p.head_dim();
    const int h = q_head / p.group;
    const int g = q_head % p.group;
    const int seq_len = p.seq_lens[b];
    float merged_max = -core::kInf;
    for (int s = 0; s < p.num_splits; ++s) {
      if (core::split_range(seq_len, p.num_splits, s).empty()) continue;  // max -inf: no effect
      merged_max = core::max_f(merged_max, p.partial(b, h, s, g)[dims]);
    }
    for (int d = 0; d < dims; d += W) F(0.0f).store_unaligned(out + d);
    float sum = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      if (core::split_range(seq_len, p.num_splits, s).empty()) continue;
      const float* part = p.partial(b, h, s, g);
      const float w = fallback::exp2(part[dims] - merged_max);
      sum = std::fma(w, part[dims + 1], sum);
      const F wv(w);
      for (int d = 0; d < dims; d += W) {
        fma_rn<A>(wv, F::load_unaligned(part + d), F::load_unaligned(out + d)).store_unaligned(out + d);
      }
    }
    if (merged_max == -core::kInf) {
      for (int d = 0; d < dims; d += W) F(0.0f).store_unaligned(out + d);
      *lse = -core::kInf;
      return;
    }
    const F sv(sum);
    for (int d = 0; d < dims; d += W) (F::load_unaligned(out + d) / sv).store_unaligned(out + d);
    *lse = (merged_max + fallback::log2(sum)) * core::kLn2;
  }

  // The decode item for the call's format.
  static void decode_item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
    const core::Format& f = p.layout.format;
    const int k = f.key_bits;
    if (f.value_bits == 4) {
      if (k == 4) return item<4, 4>(p, b, h, s, scratch);
      if (k == 3) return item<3, 4>(p, b, h, s, scratch);
      return item<8, 4>(p, b, h, s, scratch);
    }
    if (k == 4) return item<4, 3>(p, b, h, s, scratch);
    if (k == 3) return item<3, 3>(p, b, h, s, scratch);
    return item<8, 3>(p, b, h, s, scratch);
  }
};

}  // namespace turboquant::cpu::simd
