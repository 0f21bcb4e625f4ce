// dequantize_reference on real vLLM AoS caches against a float64 dequantizer
// written here from the cases' README alone (per-slot byte offsets, its own
// unpacking, FP8 decoding and Hadamard), and float64 attention over that
// against the case's reference_out_f64 and the golden decode's LSE. The
// offsets are computed here on purpose: an oracle that asked BlockLayout
// would share its mistakes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/random_problem.hpp"
#include "cpu/aos_cases.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/dequantize.hpp"

namespace turboquant {
namespace {

using testing::load_aos_case;

double f64_half(const std::uint8_t* p) {
  const int bits = p[0] | (p[1] << 8);
  const int e = (bits >> 10) & 31, m = bits & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return bits & 0x8000 ? -mag : mag;
}

// Sign, 4 exponent bits, 3 mantissa bits; exponent 0 is subnormal. e4m3 (bias
// 7) has NaN at 0x7f/0xff; e4b15 (bias 15) has no NaN (README, "Decoding e4b15").
double f64_fp8(std::uint8_t b, bool e4b15) {
  const int bias = e4b15 ? 15 : 7, e = (b >> 3) & 15, m = b & 7;
  if (!e4b15 && (b & 0x7f) == 0x7f) return NAN;
  const double mag = e == 0 ? std::ldexp(m, -2 - bias) : std::ldexp(8 + m, e - 3 - bias);
  return b & 0x80 ? -mag : mag;
}

// Code d of a packed row: 4-bit two per byte, low nibble first; 3-bit a
// little-endian bit stream, code d at bits [3d, 3d + 3).
int code_at(int bits, const std::uint8_t* p, int d) {
  const int bit = bits * d;
  const int window = p[bit / 8] | (bit % 8 + bits > 8 ? p[bit / 8 + 1] << 8 : 0);
  return (window >> (bit % 8)) & ((1 << bits) - 1);
}

struct F64Slots {
  std::vector<double> k_rot, k, v;  // [N, Hk, D] in slot_mapping order
};

// README "Layouts", AoS: the slot of (block, position, head) starts at
// ((block * block_size + position) * Hk + head) * slot_bytes and holds [key
// codes | norm fp16 | value codes | scale fp16 | zero fp16] (FP8: [D key bytes
// | value codes | scale | zero]); K_rot = ||k|| * c / sqrt(sum c^2 + 1e-16)
// for the _nc presets, V = code * scale + zero, K = K_rot @ H.
F64Slots f64_dequantize(const io::CaseDir& c) {
  const Format& f = c.format;
  const int D = f.head_dim, hk = c.num_kv_heads();
  const std::int64_t slot_bytes = c.kv_cache.dim(3);
  const bool fp8 = f.fp8_keys();
  const int key_bytes = fp8 ? D : (D * f.key_bits + 7) / 8 + 2;  // vLLM's key_packed_size
  const int value_code_bytes = (D * f.value_bits + 7) / 8;
  F64Slots out;
  out.k_rot.resize(c.keys.size()), out.k.resize(c.keys.size()), out.v.resize(c.keys.size());
  for (std::int64_t i = 0; i < c.num_tokens; ++i) {
    for (int h = 0; h < hk; ++h) {
      const std::uint8_t* s = c.kv_cache.data() + (c.slot_mapping.values[i] * hk + h) * slot_bytes;
      double* kr = &out.k_rot[(i * hk + h) * D];
      if (fp8) {
        for (int d = 0; d < D; ++d) kr[d] = f64_fp8(s[d], f.fp8_format == Fp8Format::kE4b15);
      } else {
        double sum = 0;
        for (int d = 0; d < D; ++d) {
          kr[d] = c.centroids.values[code_at(f.key_bits, s, d)];
          sum += kr[d] * kr[d];
        }
        const double norm = f64_half(s + key_bytes - 2) / (f.norm_correction ? std::sqrt(sum + 1e-16) : 1.0);
        for (int d = 0; d < D; ++d) kr[d] *= norm;
      }
      const double scale = f64_half(s + key_bytes + value_code_bytes);
      const double zero = f64_half(s + key_bytes + value_code_bytes + 2);
      double* k = &out.k[(i * hk + h) * D];
      double* v = &out.v[(i * hk + h) * D];
      for (int d = 0; d < D; ++d) {
        v[d] = code_at(f.value_bits, s + key_bytes, d) * scale + zero;
        if (fp8) {
          k[d] = kr[d];
          continue;
        }
        double sum = 0;  // (K_rot @ H)[d], H[j][d] = (-1)^popcount(j & d) / sqrt(D)
        for (int j = 0; j < D; ++j) sum += (__builtin_popcount(j & d) & 1 ? -kr[j] : kr[j]);
        k[d] = sum / std::sqrt(double(D));
      }
    }
  }
  return out;
}

class VllmAosDequantize : public ::testing::TestWithParam<const char*> {};

TEST_P(VllmAosDequantize, MatchesAnIndependentFloat64Dequantization) {
  const io::CaseDir c = load_aos_case(GetParam());
  const F64Slots want = f64_dequantize(c);
  const std::size_t n = c.keys.size();
  for (Basis basis : {Basis::kRotated, Basis::kOriginal}) {
    SCOPED_TRACE(basis == Basis::kRotated ? "rotated" : "original");
    std::vector<float> k(n), v(n);
    DequantizeArgs a;
    a.slots = {c.slot_mapping.data(), c.slot_mapping.size() * 8};
    a.num_slots = c.num_tokens;
    a.keys = {k.data(), n * 4};
    a.values = {v.data(), n * 4};
    a.basis = basis;
    ASSERT_TRUE(dequantize_reference(io::case_cache(c), a).ok());
    const std::vector<double>& want_k = basis == Basis::kRotated ? want.k_rot : want.k;
    // fp32 arithmetic against float64: a few fp32 ulps per element.
    const double k_err = testing::rel_l2(k, want_k), v_err = testing::rel_l2(v, want.v);
    EXPECT_LE(k_err, 1e-6);
    EXPECT_LE(v_err, 1e-6);
    std::printf("[ numbers  ] %s %s: dequantize vs f64, K rel L2 %.3g, V rel L2 %.3g\n", GetParam(),
                basis == Basis::kRotated ? "rotated" : "original", k_err, v_err);
  }
}

// float64 attention over the independent dequantization reproduces the case's
// own reference_out_f64 (itself checked against a second decoder, README), and
// its LSE the golden decode's.
TEST_P(VllmAosDequantize, Float64AttentionOverItMatchesTheCaseAndTheGoldenLse) {
  const io::CaseDir c = load_aos_case(GetParam());
  const F64Slots kv = f64_dequantize(c);
  const int D = c.head_dim(), hk = c.num_kv_heads(), hq = c.num_q_heads, bs = c.block_size();
  // Token position -> row of the dequantized arrays (slot_mapping order).
  std::vector<std::int64_t> row_of_slot(static_cast<std::size_t>(c.num_blocks * bs), -1);
  for (std::int64_t i = 0; i < c.num_tokens; ++i) row_of_slot[c.slot_mapping.values[i]] = i;
  std::vector<double> out(c.reference_out_f64.size()), lse(static_cast<std::size_t>(c.batch * hq));
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const int len = c.seq_lens.values[b];
    for (int qh = 0; qh < hq; ++qh) {
      const int h = qh / (hq / hk);
      const float* q = &c.query.values[(b * hq + qh) * D];
      std::vector<double> s(len);
      double mx = -INFINITY;
      for (int p = 0; p < len; ++p) {
        const std::int64_t blk = c.block_table.values[b * c.max_blocks_per_seq + p / bs];
        const std::int64_t row = row_of_slot[blk * bs + p % bs];
        ASSERT_GE(row, 0) << "sequence " << b << " position " << p << " was never stored";
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[d] * kv.k[(row * hk + h) * D + d];
        s[p] = c.scale * dot;
        mx = std::max(mx, s[p]);
      }
      double sum = 0;
      double* o = &out[(b * hq + qh) * D];
      for (int p = 0; p < len; ++p) {
        const std::int64_t blk = c.block_table.values[b * c.max_blocks_per_seq + p / bs];
        const std::int64_t row = row_of_slot[blk * bs + p % bs];
        const double w = std::exp(s[p] - mx);
        sum += w;
        for (int d = 0; d < D; ++d) o[d] += w * kv.v[(row * hk + h) * D + d];
      }
      for (int d = 0; d < D; ++d) o[d] /= sum;
      lse[b * hq + qh] = mx + std::log(sum);
    }
  }
  const double vs_case = testing::rel_l2(out, c.reference_out_f64.values);
  EXPECT_LE(vs_case, 1e-12);  // two float64 computations of the same formula

  std::vector<float> gold, gold_lse;
  const DecodeArgs a = io::case_decode_args(c, nullptr, c.num_kv_splits, &gold, &gold_lse);
  ASSERT_TRUE(decode_reference(io::case_cache(c), a).ok());
  double lse_err = 0;
  for (std::size_t i = 0; i < lse.size(); ++i) lse_err = std::max(lse_err, std::fabs(gold_lse[i] - lse[i]));
  EXPECT_LE(lse_err, 1e-5);
  EXPECT_LE(testing::rel_l2(gold, out), 1e-6);
  std::printf("[ numbers  ] %s: f64 oracle vs reference_out_f64 %.3g; golden LSE max abs vs f64 %.3g\n", GetParam(),
              vs_case, lse_err);
}

INSTANTIATE_TEST_SUITE_P(Cases, VllmAosDequantize, ::testing::ValuesIn(testing::kAosCases), testing::aos_case_id);

}  // namespace
}  // namespace turboquant
