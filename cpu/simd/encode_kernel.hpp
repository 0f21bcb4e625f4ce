// The store (core::encode_token_head) on registers, templated on the xsimd arch
// and instantiated once per ISA. Per token-head, in the reference's order:
// normalize (dot16 of k with itself, sqrt, k / (norm + 1e-8)), rotate (the
// FWHT butterflies, or the dense fma chains), bucketize, pack, the norm
// correction, then the value min/max/scale/codes and the fp16 metadata.
// Rows with a non-finite element take the scalar path (fallback::), so every
// byte matches encode_reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "isa_traits.hpp"
#include "kernels.hpp"
#include "turboquant/core/half.hpp"
#include "turboquant/core/quantize.hpp"

namespace turboquant::cpu::simd {

template <class A>
struct EncodeKernels {
  using S = Isa<A>;
  using F = typename S::F;
  using I = xsimd::batch<std::int32_t, A>;
  static constexpr int R = S::kRegs;
  static constexpr int W = S::kWidth;
  static constexpr int kMaxRegs = core::kMaxHeadDim / W;

  // Elements [first, first + 16) of a K or V tensor, widened exactly to fp32.
  static void load16(const void* base, DType t, std::int64_t first, F* out) {
    if (t == DType::kFloat32) {
      for (int r = 0; r < R; ++r) out[r] = F::load_unaligned(static_cast<const float*>(base) + first + r * W);
    } else if (t == DType::kFloat16) {
      S::half16(static_cast<const std::uint16_t*>(base) + first, out);
    } else {
      S::bf16x16(static_cast<const std::uint16_t*>(base) + first, out);
    }
  }

  // Codes (small non-negative integers held as floats) -> lookup indices.
  static typename S::Codes indices(const F* code_f) {
    I c[R];
    for (int r = 0; r < R; ++r) c[r] = xsimd::to_int(code_f[r]);
    return S::make_codes(c);
  }

  // core::Codebook::bucketize: the number of midpoints <= y. Sorted midpoints
  // allow a binary search (same count); otherwise count them one by one.
  template <int Bits>
  static void bucketize(const F* y, const core::Codebook& cb, bool sorted, const typename S::Table& mids, F* code) {
    for (int r = 0; r < R; ++r) code[r] = F(0.0f);
    if (sorted) {
      for (int step = 1 << (Bits - 1); step >= 1; step >>= 1) {
        F probe[R];
        for (int r = 0; r < R; ++r) probe[r] = code[r] + F(static_cast<float>(step - 1));
        F m[R];
        S::template lookup<4>(indices(probe), mids, m);
        for (int r = 0; r < R; ++r) code[r] = xsimd::select(y[r] >= m[r], code[r] + F(static_cast<float>(step)), code[r]);
      }
      return;
    }
    for (int i = 0; i < cb.size() - 1; ++i) {
      const F m(cb.midpoints[i]);
      for (int r = 0; r < R; ++r) code[r] = xsimd::select(y[r] >= m, code[r] + F(1.0f), code[r]);
    }
  }

  // Writes fp16(clamp(x)) of up to three metadata values.
  static void write_meta(const core::BlockLayout& l, std::uint8_t* block, int t, int h, const float* x,
                         const core::MetaField* fields, int count) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < count; ++i) {
      float v = x[i];
      if (v > core::kFp16Max) v = core::kFp16Max;
      if (v < -core::kFp16Max) v = -core::kFp16Max;
      c[i] = v;
    }
    alignas(16) std::uint16_t half[8];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(half), S::to_half4(_mm_loadu_ps(c)));
    for (int i = 0; i < count; ++i) std::memcpy(block + l.meta_field_offset(t, h, fields[i]), &half[i], 2);
  }

  template <int KeyBits, int VBits>
  static void token_head(const EncodeProblem& p, std::uint8_t* block, int t, int h, std::int64_t first,
                         const typename S::Table& centroids, const typename S::Table& mids) {
    const core::BlockLayout& l = p.layout;
    const int dims = l.format.head_dim;
    const int nregs = dims / W;
    alignas(64) float k[core::kMaxHeadDim];
    alignas(64) float v[core::kMaxHeadDim];
    F bad(0.0f);  // stays 0 unless some element is inf or NaN
    for (int d = 0; d < dims; d += 16) {
      F x[R];
      load16(p.keys, p.dtype, first + d, x);
      for (int r = 0; r < R; ++r) {
        bad = bad + (x[r] - x[r]);
        x[r].store_aligned(k + d + r * W);
      }
      load16(p.values, p.dtype, first + d, x);
      for (int r = 0; r < R; ++r) {
        bad = bad + (x[r] - x[r]);
        x[r].store_aligned(v + d + r * W);
      }
    }
    if (xsimd::any(xsimd::isnan(bad))) {
      fallback::encode_token_head(p, block, t, h, k, v);
      return;
    }

    std::uint8_t* key_bytes = block + l.key_data_offset(t, h);
    float meta[3];
    core::MetaField fields[3];
    int nmeta = 0;
    if constexpr (KeyBits == 8) {
      fallback::encode_fp8(k, dims, key_bytes);
    } else {
      // normalize_key: ||k|| = sqrt(dot16(k, k)); x_hat = k / (||k|| + 1e-8).
      F y[kMaxRegs];
      F acc[R];
      for (int r = 0; r < R; ++r) acc[r] = F(0.0f);
      for (int d = 0; d < dims; d += 16)
        for (int r = 0; r < R; ++r) {
          const F x = F::load_aligned(k + d + r * W);
          acc[r] = fma_rn<A>(x, x, acc[r]);
        }
      const float norm = std::sqrt(S::reduce_one(acc));
      const F denom(norm + core::kNormEpsilon);
      for (int j = 0; j < nregs; ++j) y[j] = F::load_aligned(k + j * W) / denom;

      // rotate_forward.
      if (p.rotation.pit == nullptr) {
        for (int j = 0; j < nregs; ++j) {
          y[j] = S::template butterfly<1>(y[j]);
          y[j] = S::template butterfly<2>(y[j]);
          y[j] = S::template butterfly<4>(y[j]);
          if constexpr (W == 16) y[j] = S::template butterfly<8>(y[j]);
        }
        for (int hr = 1; hr < nregs; hr <<= 1) {
          for (int j = 0; j < nregs; ++j) {
            if (j & hr) continue;
            const F a = y[j];
            const F b = y[j + hr];
            y[j] = a + b;
            y[j + hr] = a - b;
          }
        }
        const F scale(core::inv_sqrt_pow2(dims));
        for (int j = 0; j < nregs; ++j) y[j] = y[j] * scale;
      } else {
        alignas(64) float x_hat[core::kMaxHeadDim];
        for (int j = 0; j < nregs; ++j) y[j].store_aligned(x_hat + j * W);
        const float* pit = p.rotation.pit;
        for (int j = 0; j < nregs; ++j) {
          F s(0.0f);
          for (int i = 0; i < dims; ++i) s = fma_rn<A>(F(x_hat[i]), F::load_unaligned(pit + std::int64_t{i} * dims + j * W), s);
          y[j] = s;
        }
      }

      // bucketize, pack, and the reconstruction c[idx] for the norm correction.
      F sq[R];
      for (int r = 0; r < R; ++r) sq[r] = F(0.0f);
      for (int c = 0; c < dims / 16; ++c) {
        F code[R];
        bucketize<KeyBits>(y + c * R, *p.codebook, p.midpoints_sorted, mids, code);
        I ci[R];
        for (int r = 0; r < R; ++r) ci[r] = xsimd::to_int(code[r]);
        pack16<KeyBits>(S::codes_to_bytes(ci), key_bytes + c * 2 * KeyBits);
        F rec[R];
        S::template lookup<4>(S::make_codes(ci), centroids, rec);
        for (int r = 0; r < R; ++r) sq[r] = fma_rn<A>(rec[r], rec[r], sq[r]);
      }
      float stored = norm;
      if (l.format.norm_correction) {  // core::stored_key_norm
        const float inv = 1.0f / std::sqrt(S::reduce_one(sq) + core::kCorrectionEpsilon);
        stored = norm * inv;
      }
      meta[nmeta] = stored;
      fields[nmeta++] = core::MetaField::kKeyNorm;
    }

    // value_params: min and max are order-free except for the sign of a zero
    // result; then the sequential scan decides, as in the reference.
    F mn[R];
    F mx[R];
    for (int r = 0; r < R; ++r) mn[r] = mx[r] = F::load_aligned(v + r * W);
    for (int d = 16; d < dims; d += 16)
      for (int r = 0; r < R; ++r) {
        const F x = F::load_aligned(v + d + r * W);
        mn[r] = xsimd::select(x < mn[r], x, mn[r]);
        mx[r] = xsimd::select(x > mx[r], x, mx[r]);
      }
    alignas(64) float lanes_mn[16];
    alignas(64) float lanes_mx[16];
    for (int r = 0; r < R; ++r) {
      mn[r].store_aligned(lanes_mn + r * W);
      mx[r].store_aligned(lanes_mx + r * W);
    }
    float vmin = lanes_mn[0];
    float vmax = lanes_mx[0];
    for (int i = 1; i < 16; ++i) {
      vmin = lanes_mn[i] < vmin ? lanes_mn[i] : vmin;
      vmax = lanes_mx[i] > vmax ? lanes_mx[i] : vmax;
    }
    if (vmin == 0.0f || vmax == 0.0f) {
      vmin = v[0];
      vmax = v[0];
      for (int d = 1; d < dims; ++d) {
        vmin = v[d] < vmin ? v[d] : vmin;
        vmax = v[d] > vmax ? v[d] : vmax;
      }
    }
    constexpr int kLevels = (1 << VBits) - 1;
    float scale = (vmax - vmin) / static_cast<float>(kLevels);
    if (!(scale > core::kMinValueScale)) scale = core::kMinValueScale;

    // value_code: clamp(trunc((v - zero) / scale + 0.5), 0, levels).
    std::uint8_t* value_bytes = block + l.value_data_offset(t, h);
    const F zero(vmin);
    const F sc(scale);
    const F levels(static_cast<float>(kLevels));
    for (int c = 0; c < dims / 16; ++c) {
      I ci[R];
      for (int r = 0; r < R; ++r) {
        const F q = (F::load_aligned(v + 16 * c + r * W) - zero) / sc + F(0.5f);
        const F code = xsimd::select(q >= F(0.0f), xsimd::select(q >= levels, levels, xsimd::trunc(q)), F(0.0f));
        ci[r] = xsimd::to_int(code);
      }
      pack16<VBits>(S::codes_to_bytes(ci), value_bytes + c * 2 * VBits);
    }
    meta[nmeta] = scale;
    fields[nmeta++] = core::MetaField::kValueScale;
    meta[nmeta] = vmin;
    fields[nmeta++] = core::MetaField::kValueZero;
    write_meta(l, block, t, h, meta, fields, nmeta);
  }

  template <int KeyBits, int VBits>
  static void tokens(const EncodeProblem& p, std::int64_t begin, std::int64_t end) {
    const core::BlockLayout& l = p.layout;
    alignas(64) float lut[16] = {};
    alignas(64) float mid[16] = {};
    if constexpr (KeyBits != 8) {
      for (int i = 0; i < p.codebook->size(); ++i) lut[i] = p.codebook->centroids[i];
      for (int i = 0; i + 1 < p.codebook->size(); ++i) mid[i] = p.codebook->midpoints[i];
    }
    const typename S::Table centroids = S::table(lut);
    const typename S::Table mids = S::table(mid);
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t slot;
      std::memcpy(&slot, static_cast<const std::uint8_t*>(p.slot_mapping) + 8 * i, 8);
      if (slot < 0) continue;  // vLLM's padding convention
      std::uint8_t* block = p.cache + l.block_base(slot / l.block_size);
      const int t = static_cast<int>(slot % l.block_size);
      for (int h = 0; h < l.num_kv_heads; ++h) {
        token_head<KeyBits, VBits>(p, block, t, h, (i * l.num_kv_heads + h) * l.format.head_dim, centroids, mids);
      }
    }
  }

  static void encode_tokens(const EncodeProblem& p, std::int64_t begin, std::int64_t end) {
    const core::Format& f = p.layout.format;
    if (f.value_bits == 4) {
      if (f.key_bits == 4) return tokens<4, 4>(p, begin, end);
      if (f.key_bits == 3) return tokens<3, 4>(p, begin, end);
      return tokens<8, 4>(p, begin, end);
    }
    if (f.key_bits == 4) return tokens<4, 3>(p, begin, end);
    if (f.key_bits == 3) return tokens<3, 3>(p, begin, end);
    return tokens<8, 3>(p, begin, end);
  }
};

}  // namespace turboquant::cpu::simd
