// Encode (vLLM's store) on the GPU, byte-identical to encode_reference /
// core::encode_token_head. One group of 8 lanes per (token, KV head); lane
// `sub` holds dims sub, sub + 8, ... The element-wise steps call core/
// (div_rn, bucketize order, value_code, fp8 and fp16 narrowing, pack_codes,
// write_meta, offsets); the reductions are group_contract.cuh's exact
// re-evaluations of dot16, fwht and the min/max scan.
//
// Two steps of core/quantize.hpp are restated here because their core
// functions take the whole vector and do the reduction inside:
//   normalize_key    norm = sqrt_rn(dot16(k, k)); x = div_rn(k, add_rn(norm, 1e-8))
//   stored_key_norm  norm * div_rn(1, sqrt_rn(add_rn(dot16(c, c), 1e-16)))
// value_params is called on the pair {min, max}, which reproduces its scan.
#pragma once

#include "elements.cuh"
#include "group_contract.cuh"
#include "params.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

template <bool kDense>
inline constexpr int kEncodeThreads = kDense ? 64 : 256;

// Number of midpoints <= y for sorted midpoints: core::Codebook::bucketize as
// a binary search (equal for sorted midpoints, which can_implement checks; NaN
// -> 0 in both).
__device__ __forceinline__ int bucketize_sorted(const core::Codebook& cb, float y) {
  int idx = 0;
  const int size = cb.size();
#pragma unroll
  for (int step = core::kMaxCodebookSize / 2; step >= 1; step >>= 1) {  // unrolled, predicated
    if (2 * step <= size && y >= cb.midpoints[idx + step - 1]) idx += step;
  }
  return idx;
}

// Element type of the K/V inputs, fixed at compile time (no per-element branch,
// constant-offset addressing).
template <DType kT>
__device__ __forceinline__ float load_input(const void* base, std::int64_t i) {
  if constexpr (kT == DType::kFloat32) {
    return static_cast<const float*>(base)[i];
  } else {
    const std::uint16_t h = static_cast<const std::uint16_t*>(base)[i];
    return kT == DType::kFloat16 ? core::fp16_to_float(h) : core::bf16_to_float(h);
  }
}

// Shared memory per group: codes[D] bytes, then (dense rotation) x[D], y[D] floats.
template <int D, bool kDense>
__host__ __device__ constexpr int encode_group_smem() {
  return D + (kDense ? 2 * D * 4 : 0);
}

template <int D, bool kDense, DType kT>
__global__ void __launch_bounds__(kEncodeThreads<kDense>) encode_kernel(EncodeParams p) {
  constexpr int kE = D / kGroupLanes;
  constexpr int kGroupSmem = encode_group_smem<D, kDense>();
  __shared__ core::Codebook cb;
  __shared__ __align__(16) std::uint8_t group_smem[kEncodeThreads<kDense> / kGroupLanes * kGroupSmem];
  if (threadIdx.x == 0) cb = p.codebook;
  __syncthreads();

  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const int lane = threadIdx.x & 31;
  const int sub = lane & (kGroupLanes - 1);
  const unsigned mask = 0xffu << (lane & ~(kGroupLanes - 1));
  const int leader = lane & ~(kGroupLanes - 1);
  const int group_in_block = threadIdx.x / kGroupLanes;
  const std::int64_t item = std::int64_t{blockIdx.x} * (kEncodeThreads<kDense> / kGroupLanes) + group_in_block;
  if (item >= p.num_tokens * l.num_kv_heads) return;
  const std::int64_t token = item / l.num_kv_heads;
  const int h = static_cast<int>(item % l.num_kv_heads);
  const std::int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;  // vLLM's padding convention; the whole group leaves together
  std::uint8_t* block = p.cache + l.block_base(slot / l.block_size);
  const int t = static_cast<int>(slot % l.block_size);
  std::uint8_t* codes = group_smem + group_in_block * kGroupSmem;

  float k[kE];
  float v[kE];
  const std::int64_t first = item * D;
#pragma unroll
  for (int i = 0; i < kE; ++i) {
    k[i] = load_input<kT>(p.keys, first + sub + kGroupLanes * i);
    v[i] = load_input<kT>(p.values, first + sub + kGroupLanes * i);
  }

  std::uint8_t* key_bytes = block + l.key_data_offset(t, h);
  if (f.fp8_keys()) {
#pragma unroll
    for (int i = 0; i < kE; ++i) key_bytes[sub + kGroupLanes * i] = core::float_to_fp8_e4m3(k[i]);
  } else {
    const float norm = core::sqrt_rn(group_dot16(k, k, mask));
    const float denom = core::add_rn(norm, core::kNormEpsilon);
    float y[kE];
#pragma unroll
    for (int i = 0; i < kE; ++i) y[i] = core::div_rn(k[i], denom);
    if constexpr (kDense) {
      float* xs = reinterpret_cast<float*>(codes + D);
      float* ys = xs + D;
#pragma unroll
      for (int i = 0; i < kE; ++i) xs[sub + kGroupLanes * i] = y[i];
      __syncwarp(mask);
      if (sub == 0) core::rotate_forward(core::Rotation{p.rotation}, xs, ys, D);
      __syncwarp(mask);
#pragma unroll
      for (int i = 0; i < kE; ++i) y[i] = ys[sub + kGroupLanes * i];
    } else {
      group_fwht(y, sub, mask);
      const float scale = core::inv_sqrt_pow2(D);
#pragma unroll
      for (int i = 0; i < kE; ++i) y[i] = core::mul_rn(y[i], scale);
    }
#pragma unroll
    for (int i = 0; i < kE; ++i) {
      const int code = bucketize_sorted(cb, y[i]);
      codes[sub + kGroupLanes * i] = static_cast<std::uint8_t>(code);
      y[i] = cb.centroids[code];  // the reconstruction c[idx], as encode_token_head reuses y
    }
    float stored = norm;
    if (f.norm_correction) {
      const float sum_sq = group_dot16(y, y, mask);
      stored = core::mul_rn(norm, core::div_rn(1.0f, core::sqrt_rn(core::add_rn(sum_sq, core::kCorrectionEpsilon))));
    }
    __syncwarp(mask);
    for (int g8 = sub; g8 < D / 8; g8 += kGroupLanes) {
      core::pack_codes(f.key_bits, codes + 8 * g8, 8, key_bytes + g8 * f.key_bits);
    }
    if (sub == 0) core::write_meta(l, block, t, h, core::MetaField::kKeyNorm, stored);
    __syncwarp(mask);
  }

  const float extremes[2] = {group_extreme<true>(v, sub, mask, leader), group_extreme<false>(v, sub, mask, leader)};
  const core::ValueParams vp = core::value_params(extremes, 2, f.value_bits);
#pragma unroll
  for (int i = 0; i < kE; ++i) codes[sub + kGroupLanes * i] = static_cast<std::uint8_t>(core::value_code(v[i], vp, f.value_bits));
  __syncwarp(mask);
  std::uint8_t* value_bytes = block + l.value_data_offset(t, h);
  for (int g8 = sub; g8 < D / 8; g8 += kGroupLanes) {
    core::pack_codes(f.value_bits, codes + 8 * g8, 8, value_bytes + g8 * f.value_bits);
  }
  if (sub == 0) core::write_meta(l, block, t, h, core::MetaField::kValueScale, vp.scale);
  if (sub == 1) core::write_meta(l, block, t, h, core::MetaField::kValueZero, vp.zero);
}

}  // namespace turboquant::cuda::detail
