// Reading and writing one (token, KV head) record of a cache block: the store
// (facts §d, §e) and the per-token decode steps. Every backend's scalar path
// and the CUDA strict kernels call these, so the bytes and the dequantized
// values have one definition. `block` points at the first byte of a block.
#pragma once

#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/fp8.hpp"
#include "turboquant/core/half.hpp"
#include "turboquant/core/pack.hpp"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/rotation.hpp"

namespace turboquant::core {

TQ_HD float read_meta(const BlockLayout& l, const std::uint8_t* block, int t, int h, MetaField f) {
  const std::uint8_t* p = block + l.meta_field_offset(t, h, f);
  return fp16_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

TQ_HD void write_meta(const BlockLayout& l, std::uint8_t* block, int t, int h, MetaField f, float value) {
  const std::uint16_t bits = float_to_fp16_clamped(value);
  std::uint8_t* p = block + l.meta_field_offset(t, h, f);
  p[0] = static_cast<std::uint8_t>(bits);
  p[1] = static_cast<std::uint8_t>(bits >> 8);
}

// Key of (t, h) in the basis the scores are computed in: for Lloyd-Max keys the
// centroids c[idx[d]] (rotated basis, *without* the norm, which multiplies the
// dot product instead); for FP8 keys the decoded fp8 values (original basis).
TQ_HD void decode_key_direction(const BlockLayout& l, const std::uint8_t* block, int t, int h, const Codebook& cb,
                                float* out) {
  const std::uint8_t* bytes = block + l.key_data_offset(t, h);
  const int dims = l.format.head_dim;
  if (l.format.fp8_keys()) {
    for (int d = 0; d < dims; ++d) out[d] = fp8_to_float(l.format.fp8_format, bytes[d]);
    return;
  }
  for (int d = 0; d < dims; ++d) out[d] = cb.centroids[unpack_code(l.format.key_bits, bytes, d)];
}

// The stored key norm (SoA: with the norm correction folded in; AoS: ||k||);
// 1 for FP8 keys.
TQ_HD float read_key_norm(const BlockLayout& l, const std::uint8_t* block, int t, int h) {
  return l.format.fp8_keys() ? 1.0f : read_meta(l, block, t, h, MetaField::kKeyNorm);
}

// The norm the scores and the dequantized K of (t, h) are multiplied by, given
// its key direction (decode_key_direction): the stored norm, corrected here
// by dot16(c, c) when the layout corrects at decode (AoS).
TQ_HD float decode_key_norm(const BlockLayout& l, const std::uint8_t* block, int t, int h, const float* direction) {
  const float stored = read_key_norm(l, block, t, h);
  if (!l.format.norm_corrected_at_decode()) return stored;
  return decoded_key_norm(stored, dot16(direction, direction, l.format.head_dim), true);
}

// Base-2 logit of a key against a query already scaled by softmax_scale*log2(e)
// (and rotated, for Lloyd-Max keys): dot16, times decode_key_norm (MSE only).
TQ_HD float key_score(const Format& f, float dot, float norm) { return f.fp8_keys() ? dot : mul_rn(dot, norm); }

// The scores of token t's key against `group` prepared queries (consecutive
// rows of head_dim floats): scores[g * score_stride] for query g. `key` is
// scratch of head_dim floats (it is left holding the key direction).
TQ_HD void score_token(const BlockLayout& l, const std::uint8_t* block, int t, int h, const Codebook& cb,
                       const float* queries, int group, float* key, float* scores, int score_stride) {
  const int dims = l.format.head_dim;
  decode_key_direction(l, block, t, h, cb, key);
  const float norm = decode_key_norm(l, block, t, h, key);
  for (int g = 0; g < group; ++g) {
    scores[g * score_stride] = key_score(l.format, dot16(queries + std::int64_t{g} * dims, key, dims), norm);
  }
}

TQ_HD void decode_value(const BlockLayout& l, const std::uint8_t* block, int t, int h, float* out) {
  const std::uint8_t* bytes = block + l.value_data_offset(t, h);
  const float scale = read_meta(l, block, t, h, MetaField::kValueScale);
  const float zero = read_meta(l, block, t, h, MetaField::kValueZero);
  for (int d = 0; d < l.format.head_dim; ++d) {
    out[d] = dequant_value(unpack_code(l.format.value_bits, bytes, d), scale, zero);
  }
}

// The store of one token-head: writes exactly its key bytes, value bytes and
// metadata fields, nothing else. k and v are fp32 [head_dim].
TQ_HD void encode_token_head(const BlockLayout& l, std::uint8_t* block, int t, int h, const float* k, const float* v,
                             const Codebook& cb, const Rotation& rot) {
  const Format& f = l.format;
  const int dims = f.head_dim;
  std::uint8_t codes[kMaxHeadDim];
  std::uint8_t* key_bytes = block + l.key_data_offset(t, h);
  if (f.fp8_keys()) {
    for (int d = 0; d < dims; ++d) key_bytes[d] = float_to_fp8(f.fp8_format, k[d]);
  } else {
    float x_hat[kMaxHeadDim];
    float y[kMaxHeadDim];
    const float norm = normalize_key(k, dims, x_hat);
    rotate_forward(rot, x_hat, y, dims);
    for (int d = 0; d < dims; ++d) {
      codes[d] = static_cast<std::uint8_t>(cb.bucketize(y[d]));
      y[d] = cb.centroids[codes[d]];  // reuse y for the reconstruction c[idx]
    }
    pack_codes(f.key_bits, codes, dims, key_bytes);
    write_meta(l, block, t, h, MetaField::kKeyNorm, stored_key_norm(norm, y, dims, f.norm_folded_at_store()));
  }
  const ValueParams vp = value_params(v, dims, f.value_bits);
  for (int d = 0; d < dims; ++d) codes[d] = static_cast<std::uint8_t>(value_code(v[d], vp, f.value_bits));
  pack_codes(f.value_bits, codes, dims, block + l.value_data_offset(t, h));
  write_meta(l, block, t, h, MetaField::kValueScale, vp.scale);
  write_meta(l, block, t, h, MetaField::kValueZero, vp.zero);
}

}  // namespace turboquant::core
