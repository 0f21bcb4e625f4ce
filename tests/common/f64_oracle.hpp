// An independent float64 oracle: dense attention over K/V dequantized from the
// cache bytes by code written here from the format description (facts §b, §c,
// §e), not by the library. "All backends agree" must not hide "all are wrong".
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "turboquant/codebook.hpp"
#include "turboquant/format.hpp"
#include "turboquant/core/fp8.hpp"
#include "turboquant/core/half.hpp"

namespace turboquant::testing {

struct OracleInput {
  BlockLayout layout;
  const std::uint8_t* cache;
  int batch, num_q_heads, max_blocks;
  const std::int32_t* block_table;
  const std::int32_t* seq_lens;
  const float* query;  // [B, Hq, D], unrotated
  double scale;
  const float* centroids = nullptr;  // default: vllm_codebook
};

inline double oracle_fp16(const std::uint8_t* p) {
  return core::fp16_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

inline int oracle_code(int bits, const std::uint8_t* bytes, int d) {
  if (bits == 4) return (bytes[d / 2] >> (4 * (d % 2))) & 15;
  // 3-bit: the codes form a little-endian bit stream, code d at bits [3d, 3d+3).
  const int bit = 3 * d;
  int window = bytes[bit / 8];
  if (bit % 8 > 5) window |= bytes[bit / 8 + 1] << 8;  // straddles into the next byte
  return (window >> (bit % 8)) & 7;
}

// out [B, Hq, D] and lse [B, Hq] (natural log) in float64.
inline void f64_attention(const OracleInput& in, std::vector<double>& out, std::vector<double>& lse) {
  const Format& f = in.layout.format;
  const int D = f.head_dim, bs = in.layout.block_size, hk = in.layout.num_kv_heads;
  const int group = in.num_q_heads / hk;
  const std::int64_t stride = std::int64_t{bs} * hk * f.slot_bytes_aligned();
  const std::int64_t meta = std::int64_t{bs} * hk * f.data_bytes();
  const int nf = f.fp8_keys() ? 2 : 3;
  const float* cents = in.centroids ? in.centroids
                                    : (f.fp8_keys() ? nullptr : vllm_codebook(D, f.key_bits).centroids);
  out.assign(static_cast<std::size_t>(in.batch) * in.num_q_heads * D, 0.0);
  lse.assign(static_cast<std::size_t>(in.batch) * in.num_q_heads, -INFINITY);
  std::vector<double> q(D), k(D), scores;
  for (int b = 0; b < in.batch; ++b) {
    const int len = in.seq_lens[b];
    for (int hq = 0; hq < in.num_q_heads; ++hq) {
      const int h = hq / group;
      const float* qrow = in.query + (std::int64_t{b} * in.num_q_heads + hq) * D;
      for (int i = 0; i < D; ++i) {  // rotate with the Sylvester Hadamard / sqrt(D) for Lloyd-Max keys
        if (f.fp8_keys()) {
          q[i] = qrow[i];
          continue;
        }
        double s = 0;
        for (int j = 0; j < D; ++j) s += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * qrow[j];
        q[i] = s / std::sqrt(double(D));
      }
      scores.assign(len, 0.0);
      std::vector<std::vector<double>> vals(len, std::vector<double>(D));
      for (int t = 0; t < len; ++t) {
        const std::uint8_t* blk = in.cache + in.block_table[b * in.max_blocks + t / bs] * stride;
        const int slot = t % bs;
        const std::uint8_t* rec = blk + (std::int64_t{slot} * hk + h) * f.data_bytes();
        const auto field = [&](int fi) { return oracle_fp16(blk + meta + 2 * ((std::int64_t{h} * nf + fi) * bs + slot)); };
        double dot = 0;
        for (int d = 0; d < D; ++d) {
          k[d] = f.fp8_keys() ? core::fp8_e4m3_to_float(rec[d]) : cents[oracle_code(f.key_bits, rec, d)];
          dot += q[d] * k[d];
        }
        scores[t] = (f.fp8_keys() ? dot : dot * field(0)) * in.scale;
        const double vscale = field(nf - 2), vzero = field(nf - 1);
        for (int d = 0; d < D; ++d) vals[t][d] = oracle_code(f.value_bits, rec + f.key_data_bytes(), d) * vscale + vzero;
      }
      if (len == 0) continue;
      double mx = -INFINITY, den = 0;
      for (double s : scores) mx = std::max(mx, s);
      for (int t = 0; t < len; ++t) {
        const double w = std::exp(scores[t] - mx);
        den += w;
        for (int d = 0; d < D; ++d) out[(std::int64_t{b} * in.num_q_heads + hq) * D + d] += w * vals[t][d];
      }
      for (int d = 0; d < D; ++d) out[(std::int64_t{b} * in.num_q_heads + hq) * D + d] /= den;
      lse[std::int64_t{b} * in.num_q_heads + hq] = mx + std::log(den);
    }
  }
}

}  // namespace turboquant::testing
