// An independent float64 oracle: dense attention over K/V dequantized from the
// cache bytes by code written here from the format description (facts §0a,
// §b, §c, §d, §e; ../shared/cases/README.md "Layouts"), not by the library.
// "All backends agree" must not hide "all are wrong". It deliberately keeps
// its own per-slot byte offsets (OracleSlotMap), its own fp16 / FP8 decoding
// and its own AoS norm correction instead of calling core::BlockLayout,
// core/fp8.hpp or core/half.hpp: the one place for every offset of the
// library is what this file checks, so it must not share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "turboquant/codebook.hpp"
#include "turboquant/format.hpp"

namespace turboquant::testing {

struct OracleInput {
  BlockLayout layout;  // only its parameters are read (preset numbers, layout kind, FP8 flavour, sizes)
  const std::uint8_t* cache;
  int batch, num_q_heads, max_blocks;
  const std::int32_t* block_table;
  const std::int32_t* seq_lens;
  const float* query;  // [B, Hq, D], unrotated
  double scale;
  const float* centroids = nullptr;  // default: vllm_codebook
  // Multi-token rows, sinks, window (decode.hpp): query [T, Hq, D] with
  // T = query_start_loc[batch]; row i of sequence b at position
  // seq_lens[b] - q_len_b + i attends to [max(0, p - W + 1), p].
  const std::int32_t* query_start_loc = nullptr;  // [batch + 1]; null: one row per sequence
  const float* sinks = nullptr;                    // [Hq], natural-log units; null: none
  int sliding_window = 0;                          // 0: unlimited
};

// IEEE binary16, little endian.
inline double oracle_fp16(const std::uint8_t* p) {
  const int h = p[0] | (p[1] << 8);
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 31 ? (m ? NAN : INFINITY) : (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
  return h & 0x8000 ? -mag : mag;
}

// FP8 keys: e4m3fn (bias 7, 0x7f/0xff NaN, no inf) or e4b15 (bias 15, no inf
// or NaN: 0x7f reads 1.875); exponent 0 is subnormal in both.
inline double oracle_fp8(Fp8Format f, std::uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const int bias = f == Fp8Format::kE4b15 ? 15 : 7;
  double mag;
  if (f == Fp8Format::kE4m3 && e == 15 && m == 7) {
    mag = NAN;
  } else {
    mag = e == 0 ? std::ldexp(m, 1 - bias - 3) : std::ldexp(8 + m, e - bias - 3);
  }
  return b & 0x80 ? -mag : mag;
}

inline int oracle_code(int bits, const std::uint8_t* bytes, int d) {
  if (bits == 4) return (bytes[d / 2] >> (4 * (d % 2))) & 15;
  // 3-bit: the codes form a little-endian bit stream, code d at bits [3d, 3d+3).
  const int bit = 3 * d;
  int window = bytes[bit / 8];
  if (bit % 8 > 5) window |= bytes[bit / 8 + 1] << 8;  // straddles into the next byte
  return (window >> (bit % 8)) & 7;
}

// The byte offsets of one (slot t, head h) inside a block, from the spec:
//   key bytes KB = D (FP8) or D*bits/8; value bytes VB = D*bits/8; NF fp16
//   fields (MSE: norm, scale, zero; FP8: scale, zero); the padded slot is
//   KB + VB + 2*NF rounded up to even; a block holds bs*Hk padded slots.
//   SoA: record [KB | VB] at (t*Hk + h)*(KB + VB); fp16 field f of (t, h) at
//        bs*Hk*(KB + VB) + 2*((h*NF + f)*bs + t).
//   AoS: slot at (t*Hk + h)*padded = [KB | norm | VB | scale | zero] (FP8:
//        [KB | VB | scale | zero]), vLLM's key_packed_size = KB + 2 (KB for FP8).
struct OracleSlotMap {
  bool aos, fp8;
  int kb, vb, nf, bs, hk;
  std::int64_t padded;

  explicit OracleSlotMap(const BlockLayout& l)
      : aos(l.format.layout == LayoutKind::kAoS),
        fp8(l.format.key_bits == 8),
        kb(fp8 ? l.format.head_dim : l.format.head_dim * l.format.key_bits / 8),
        vb(l.format.head_dim * l.format.value_bits / 8),
        nf(fp8 ? 2 : 3),
        bs(l.block_size),
        hk(l.num_kv_heads),
        padded((kb + vb + 2 * nf + 1) / 2 * 2) {}

  std::int64_t block_bytes() const { return std::int64_t{bs} * hk * padded; }
  std::int64_t slot_index(int t, int h) const { return std::int64_t{t} * hk + h; }
  std::int64_t key_at(int t, int h) const { return slot_index(t, h) * (aos ? padded : kb + vb); }
  std::int64_t value_at(int t, int h) const { return key_at(t, h) + kb + (aos && !fp8 ? 2 : 0); }
  // Field f in stored order (MSE: 0 norm, 1 scale, 2 zero; FP8: 0 scale, 1 zero).
  std::int64_t field_at(int t, int h, int f) const {
    if (!aos) return std::int64_t{bs} * hk * (kb + vb) + 2 * ((std::int64_t{h} * nf + f) * bs + t);
    if (!fp8 && f == 0) return key_at(t, h) + kb;
    return value_at(t, h) + vb + 2 * (fp8 ? f : f - 1);
  }
};

// 1 for every byte of a cache of `num_blocks` blocks that an encode of
// `slots` may write, from the slot map above (so that a canary test or a
// fuzzer also checks the library's addresses): the key bytes, value bytes
// and fp16 fields of every KV head of each slot >= 0. Everything else (other
// slots, the bytes between and after slots, the padding at the end of a slot
// or a block) must keep its value.
inline std::vector<std::uint8_t> oracle_slot_mask(const BlockLayout& l, std::int64_t num_blocks,
                                                  const std::vector<std::int64_t>& slots) {
  const OracleSlotMap m(l);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(num_blocks * m.block_bytes()), 0);
  const auto mark = [&](std::int64_t at, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) mask[static_cast<std::size_t>(at + i)] = 1;
  };
  for (std::int64_t slot : slots) {
    if (slot < 0 || slot >= num_blocks * m.bs) continue;
    const std::int64_t base = slot / m.bs * m.block_bytes();
    const int t = static_cast<int>(slot % m.bs);
    for (int h = 0; h < m.hk; ++h) {
      mark(base + m.key_at(t, h), m.kb);
      mark(base + m.value_at(t, h), m.vb);
      for (int f = 0; f < m.nf; ++f) mark(base + m.field_at(t, h, f), 2);
    }
  }
  return mask;
}

// Token (t, h) of `block` dequantized: k in the basis the scores use (rotated
// for Lloyd-Max keys, times the key norm; FP8 keys as stored) and v.
// SoA stores the norm with the correction folded in; AoS stores ||k|| and
// the norm-corrected presets normalize the centroid vector here:
// ||k|| * c / sqrt(sum(c*c) + 1e-16).
inline void oracle_token(const Format& f, const OracleSlotMap& m, const std::uint8_t* block, int t, int h,
                         const float* cents, double* k, double* v) {
  const int D = f.head_dim;
  const std::uint8_t* key = block + m.key_at(t, h);
  if (m.fp8) {
    for (int d = 0; d < D; ++d) k[d] = oracle_fp8(f.fp8_format, key[d]);
  } else {
    double norm = oracle_fp16(block + m.field_at(t, h, 0));
    double sum_sq = 0;
    for (int d = 0; d < D; ++d) {
      k[d] = cents[oracle_code(f.key_bits, key, d)];
      sum_sq += k[d] * k[d];
    }
    if (m.aos && f.norm_correction) norm /= std::sqrt(sum_sq + 1e-16);
    for (int d = 0; d < D; ++d) k[d] *= norm;
  }
  const double vscale = oracle_fp16(block + m.field_at(t, h, m.nf - 2));
  const double vzero = oracle_fp16(block + m.field_at(t, h, m.nf - 1));
  const std::uint8_t* val = block + m.value_at(t, h);
  for (int d = 0; d < D; ++d) v[d] = oracle_code(f.value_bits, val, d) * vscale + vzero;
}

inline const float* oracle_centroids(const OracleInput& in) {
  const Format& f = in.layout.format;
  if (in.centroids) return in.centroids;
  return f.key_bits == 8 ? nullptr : vllm_codebook(f.head_dim, f.key_bits).centroids;
}

// out [T, Hq, D] and lse [T, Hq] (natural log, the attended scores only: no
// sink) in float64. With a sink s_h the denominator gains exp(s_h).
inline void f64_attention(const OracleInput& in, std::vector<double>& out, std::vector<double>& lse) {
  const Format& f = in.layout.format;
  const OracleSlotMap m(in.layout);
  const int D = f.head_dim, bs = in.layout.block_size, hk = in.layout.num_kv_heads;
  const int group = in.num_q_heads / hk;
  const float* cents = oracle_centroids(in);
  const std::int64_t rows = in.query_start_loc ? in.query_start_loc[in.batch] : in.batch;
  out.assign(static_cast<std::size_t>(rows) * in.num_q_heads * D, 0.0);
  lse.assign(static_cast<std::size_t>(rows) * in.num_q_heads, -INFINITY);
  std::vector<double> q(D), k(D), scores;
  for (int b = 0; b < in.batch; ++b) {
    const int len = in.seq_lens[b];
    const int first = in.query_start_loc ? in.query_start_loc[b] : b;
    const int q_len = in.query_start_loc ? in.query_start_loc[b + 1] - first : 1;
    for (int i = 0; i < q_len; ++i) {
      const std::int64_t row = first + i;
      const int end = len - q_len + i + 1;  // the row's position + 1
      const int begin = in.sliding_window > 0 ? std::max(0, end - in.sliding_window) : 0;
      const int n = std::max(0, end - begin);
      for (int hq = 0; hq < in.num_q_heads; ++hq) {
        const int h = hq / group;
        const float* qrow = in.query + (row * in.num_q_heads + hq) * D;
        for (int x = 0; x < D; ++x) {  // rotate with the Sylvester Hadamard / sqrt(D) for Lloyd-Max keys
          if (m.fp8) {
            q[x] = qrow[x];
            continue;
          }
          double s = 0;
          for (int j = 0; j < D; ++j) s += (__builtin_popcount(x & j) & 1 ? -1.0 : 1.0) * qrow[j];
          q[x] = s / std::sqrt(double(D));
        }
        scores.assign(n, 0.0);
        std::vector<std::vector<double>> vals(n, std::vector<double>(D));
        for (int t = 0; t < n; ++t) {
          const int pos = begin + t;
          const std::uint8_t* blk = in.cache + in.block_table[b * in.max_blocks + pos / bs] * m.block_bytes();
          oracle_token(f, m, blk, pos % bs, h, cents, k.data(), vals[t].data());
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q[d] * k[d];
          scores[t] = dot * in.scale;
        }
        if (n == 0) continue;
        double mx = -INFINITY;
        for (double s : scores) mx = std::max(mx, s);
        // The output's reference includes the sink (no overflow for sinks far above the scores).
        const double ref = in.sinks ? std::max(mx, double(in.sinks[hq])) : mx;
        double den = 0, den_lse = 0;
        double* o = &out[static_cast<std::size_t>((row * in.num_q_heads + hq) * D)];
        for (int t = 0; t < n; ++t) {
          const double w = std::exp(scores[t] - ref);
          den += w;
          den_lse += std::exp(scores[t] - mx);
          for (int d = 0; d < D; ++d) o[d] += w * vals[t][d];
        }
        if (in.sinks) den += std::exp(double(in.sinks[hq]) - ref);
        for (int d = 0; d < D; ++d) o[d] /= den;
        lse[static_cast<std::size_t>(row * in.num_q_heads + hq)] = mx + std::log(den_lse);
      }
    }
  }
}

}  // namespace turboquant::testing
