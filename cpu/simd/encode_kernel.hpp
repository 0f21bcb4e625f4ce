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
  static void load16(const void* base, core::DType t, std::int64_t first, F* out) {
    if (t == core::DType::kFloat32) {
      for (int r = 0; r < R; ++r) out[r] = F::load_unaligned(static_cast<const float*>(base) + first + r * W);
    } else if (t == core::DType::kFloat16) {
      S::half16(static_cast<const std::uint16_t*>(base) + first, out);
    } else {
      S::bf16x16(static_cast<const std::uint16_t*>(base) + first, out);
    }
  }

  // core::Codebook::bucketize: the number of midpoints <= y. Sorted midpoints
  // allow a binary search (same count); otherwise count them one by one.
  template <int Bits>
  static typename S::Codes bucketize(const F* y, const core::Codebook& cb, bool sorted,
                                     const typename S::Table& mids) {
    I idx[R];
    for (int r = 0; r < R; ++r) idx[r] = I(0);
    typename S::Codes codes = S::make_codes(idx);
    if (sorted) {
      for (int step = 1 << (Bits - 1); step >= 1; step >>= 1) S::bucket_step(y, mids, step, &codes);
      return codes;
    }
    F count[R];
    for (int r = 0; r < R; ++r) count[r] = F(0.0f);
    for (int i = 0; i < cb.size() - 1; ++i) {
      const F m(cb.midpoints[i]);
      for (int r = 0; r < R; ++r) count[r] = xsimd::select(y[r] >= m, count[r] + F(1.0f), count[r]);
    }
    for (int r = 0; r < R; ++r) idx[r] = xsimd::to_int(count[r]);
    return S::make_codes(idx);
  }

  // Writes fp16(clamp(x)) of up to three metadata values.
  static void write_meta(const core::BlockLayout& l, std::uint8_t* block, int t, int h, const float* x,
                         const core::MetaField* fields, int count) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < count; ++i) c[i] = core::clamp_meta(x[i]);
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
    // Non-finite inputs take the scalar path: a value is caught by the sum of
    // x - x (NaN for inf and NaN), a key by its sum of squares (not finite if
    // any element is not; also when it overflows, where the scalar path is
    // simply slower).
    F bad(0.0f);
    F kk[R];
    for (int r = 0; r < R; ++r) kk[r] = F(0.0f);
    for (int d = 0; d < dims; d += 16) {
      F x[R];
      load16(p.keys, p.dtype, first + d, x);
      for (int r = 0; r < R; ++r) {
        kk[r] = fma_rn<A>(x[r], x[r], kk[r]);  // dot16(k, k), lane by lane
        x[r].store_aligned(k + d + r * W);
      }
      load16(p.values, p.dtype, first + d, x);
      for (int r = 0; r < R; ++r) {
        bad = bad + (x[r] - x[r]);
        x[r].store_aligned(v + d + r * W);
      }
    }
    const float sum_sq = S::reduce_one(kk);
    if (xsimd::any(xsimd::isnan(bad)) || !(sum_sq - sum_sq == 0.0f)) {
      fallback::encode_token_head(p, block, t, h, k, v);
      return;
    }

    std::uint8_t* key_bytes = block + l.key_data_offset(t, h);
    float meta[3];
    core::MetaField fields[3];
    int nmeta = 0;
    if constexpr (KeyBits == 8) {
      fallback::encode_fp8(l.format.fp8_format, k, dims, key_bytes);
    } else {
      // normalize_key: ||k|| = sqrt(dot16(k, k)); x_hat = k / (||k|| + 1e-8).
      F y[kMaxRegs];
      const core::KeyDenominator kd = core::key_denominator(sum_sq);
      const float norm = kd.norm;
      const F denom(kd.denom);
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
        const typename S::Codes codes = bucketize<KeyBits>(y + c * R, *p.codebook, p.midpoints_sorted, mids);
        pack16<KeyBits>(S::codes_to_bytes(codes), key_bytes + c * 2 * KeyBits);
        F rec[R];
        S::template lookup<4>(codes, centroids, rec);
        for (int r = 0; r < R; ++r) sq[r] = fma_rn<A>(rec[r], rec[r], sq[r]);
      }
      meta[nmeta] = l.format.norm_folded_at_store() ? core::stored_key_norm(norm, S::reduce_one(sq), true) : norm;
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
    core::ValueRange range{S::min16(mn), S::max16(mx)};
    if (range.min == 0.0f || range.max == 0.0f) range = fallback::value_range(v, dims);
    const float vmin = range.min;
    const float scale = core::value_scale(range.min, range.max, VBits);
    constexpr int kLevels = (1 << VBits) - 1;

    // value_code: clamp(trunc((v - zero) / scale + 0.5), 0, levels).
    std::uint8_t* value_bytes = block + l.value_data_offset(t, h);
    const F zero(vmin);
    const F sc(scale);
    for (int c = 0; c < dims / 16; ++c) {
      F q[R];
      for (int r = 0; r < R; ++r) q[r] = (F::load_aligned(v + 16 * c + r * W) - zero) / sc + F(0.5f);
      pack16<VBits>(S::codes_to_bytes(S::value_codes(q, kLevels)), value_bytes + c * 2 * VBits);
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
    core::visit_bits(p.layout.format, [&]<int KB, int VB>() { tokens<KB, VB>(p, begin, end); });
  }
};

}  // namespace turboquant::cpu::simd
