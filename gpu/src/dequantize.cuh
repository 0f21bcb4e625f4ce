// The CUDA dequantize (cuda::dequantize, cuda::dequantize_sequences): a group
// of D/32 lanes per (item, KV head), an item being one slot of the list or one
// (sequence, position) of the block-table form, laid out as the encode's
// groups are (group_contract.cuh: lane `sub` holds kRun contiguous dims of
// every 16-dim row). The steps are core::dequantize_token_head's, in its
// order, with the group's reductions where it reduces: the centroid (or FP8)
// of each code, the stored norm (AoS: corrected by group_dot16(c, c)), c *
// norm, for the original basis group_fwht and the times 1/sqrt(D) (or, for a
// dense rotation, the fma chains of core::rotate_inverse over the vector
// staged in shared memory); values fma(code, scale, zero). So the fp32
// outputs are dequantize_reference's bits (compiled with --fmad=false, like
// the other bit-exact kernels); fp16 / bf16 outputs are those rounded to
// nearest even, as core::store_element rounds them (the conversion
// instructions, with core's quiet NaN).
//
// Record addresses are only 2-byte aligned (AoS), so codes are read as 16-bit
// words; the outputs are written a lane's run at a time, as vectors when both
// output pointers are aligned to the run (kVector).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "dequantize_params.hpp"
#include "group_contract.cuh"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kDequantizeThreads = 128;
inline constexpr int kDequantizeBlocksPerSm = 8;  // 32 warps per SM: 64 registers, no spills

// Where the group's record comes from and where its rows go.
struct DequantizeRecord {
  const std::uint8_t* block;
  int t, h;
  std::int64_t row;  // output row (head_dim elements)
  bool valid;        // false past seq_lens[b] in the block-table form
};

// Record w = item * heads + h. I: the index type, std::uint32_t when the
// work and the cache's slots fit (DequantizeParams::narrow_indices; 64-bit
// divisions are long software routines), else std::int64_t.
template <class I>
__device__ __forceinline__ DequantizeRecord locate_record(const DequantizeParams& p, I w) {
  const core::BlockLayout& l = p.layout;
  const I heads = static_cast<I>(l.num_kv_heads);
  const I bs = static_cast<I>(l.block_size);
  const I item = w / heads;
  const int h = static_cast<int>(w - item * heads);
  I slot, row;
  if (p.slots != nullptr) {
    slot = static_cast<I>(p.slots[item]);
    row = w;  // item * heads + h
  } else {
    const I max_seq = static_cast<I>(p.max_seq);
    const I b = item / max_seq;
    const I j = item - b * max_seq;
    if (j >= static_cast<I>(p.seq_lens[b])) return {nullptr, 0, 0, 0, false};
    const I blk = static_cast<I>(p.block_table[std::int64_t(b) * p.max_blocks_per_seq + j / bs]);
    slot = blk * bs + j % bs;
    row = (b * heads + h) * max_seq + j;
  }
  const I block = slot / bs;
  return {p.cache + l.block_base(std::int64_t(block)), static_cast<int>(slot - block * bs), h, std::int64_t(row), true};
}

// The kRun codes of dims first .. first + kRun - 1 of a packed array (code d
// at bit bits * d, core::unpack_code's order), in the low bits of the result:
// code e at bit bits * e. Read as the 16-bit words covering them (every code
// array starts 2-byte aligned: cuda::dequantize checks the cache pointer, and
// record and field offsets are even), so a run costs 1-5 loads, not one per byte.
template <int kRun>
__device__ __forceinline__ std::uint64_t code_run(const std::uint8_t* codes, int bits, int first) {
  // bit % 16 + bits * kRun <= 64: 8-bit and 4-bit runs start on a 16-bit word
  // when kRun >= 4, and otherwise the run is short.
  constexpr int kMaxWords = (15 + 8 * kRun + 15) / 16 < 4 ? (15 + 8 * kRun + 15) / 16 : 4;
  const int bit = bits * first;
  const int words = (bit % 16 + bits * kRun + 15) / 16;
  const auto* src = reinterpret_cast<const std::uint16_t*>(codes) + bit / 16;
  std::uint64_t w = 0;
#pragma unroll
  for (int i = 0; i < kMaxWords; ++i) {
    if (i < words) w |= std::uint64_t{src[i]} << (16 * i);
  }
  return w >> (bit % 16);
}

// The codes of lane `sub`'s elements (group_contract.cuh's order).
template <int D>
__device__ __forceinline__ void load_codes(const std::uint8_t* codes, int bits, int sub,
                                           int (&out)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  const std::uint32_t code_mask = (1u << bits) - 1u;
#pragma unroll
  for (int r = 0; r < G::kRows; ++r) {
    const std::uint64_t run = code_run<G::kRun>(codes, bits, G::dim(sub, r * G::kRun));
#pragma unroll
    for (int e = 0; e < G::kRun; ++e) {
      out[r * G::kRun + e] = static_cast<int>(static_cast<std::uint32_t>(run >> (bits * e)) & code_mask);
    }
  }
}

// K of the record in lane `sub`'s elements: core::dequantize_token_head's key
// half. `staged` (2 D floats of shared memory per group) is used only by a
// dense rotation.
template <int D>
__device__ __forceinline__ void dequantize_key(const DequantizeParams& p, const DequantizeRecord& rec,
                                               const float* centroids, int sub, unsigned mask, float* staged,
                                               float (&k)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const std::uint8_t* key_bytes = rec.block + l.key_data_offset(rec.t, rec.h);
  int codes[G::kElems];
  load_codes<D>(key_bytes, f.key_bits, sub, codes);
  if (f.fp8_keys()) {  // stored unrotated: the same values in either basis
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) k[x] = core::fp8_to_float(f.fp8_format, static_cast<std::uint8_t>(codes[x]));
    return;
  }
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) k[x] = centroids[codes[x]];
  const float stored = core::read_key_norm(l, rec.block, rec.t, rec.h);
  const float norm =
      f.norm_corrected_at_decode() ? core::decoded_key_norm(stored, group_dot16<D>(k, k, mask), true) : stored;
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) k[x] = core::mul_rn(k[x], norm);
  if (!p.original) return;
  if (p.rotation == nullptr) {  // core::rotate_inverse of the Hadamard rotation: fwht, then times 1/sqrt(D)
    group_fwht<D>(k, sub, mask);
    constexpr float kInvSqrt = core::inv_sqrt_pow2(D);
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) k[x] = core::mul_rn(k[x], kInvSqrt);
    return;
  }
  // Dense: out[i] = sum over j of in[j] * pit[i][j], an fma chain from +0 in j
  // order; in and out staged (a loop over a register array would put k in
  // local memory).
  float* out = staged + D;
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) staged[G::dim(sub, x)] = k[x];
  __syncwarp(mask);
#pragma unroll 1
  for (int x = 0; x < G::kElems; ++x) {
    const int i = G::dim(sub, x);
    const float* row = p.rotation + std::int64_t{i} * D;
    float s = 0.0f;
#pragma unroll 4
    for (int j = 0; j < D; ++j) s = core::fma_rn(staged[j], row[j], s);
    out[i] = s;
  }
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) k[x] = out[G::dim(sub, x)];  // the lane's own dims: no barrier needed
  __syncwarp(mask);  // before the next record overwrites `staged`
}

template <int D>
__device__ __forceinline__ void dequantize_value(const DequantizeParams& p, const DequantizeRecord& rec, int sub,
                                                 float (&v)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  const core::BlockLayout& l = p.layout;
  int codes[G::kElems];
  load_codes<D>(rec.block + l.value_data_offset(rec.t, rec.h), l.format.value_bits, sub, codes);
  const float scale = core::read_meta(l, rec.block, rec.t, rec.h, core::MetaField::kValueScale);
  const float zero = core::read_meta(l, rec.block, rec.t, rec.h, core::MetaField::kValueZero);
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) v[x] = core::dequant_value(static_cast<float>(codes[x]), scale, zero);
}

// Two outputs narrowed to kOut as one word (lo in the low half): the
// conversion instructions round to nearest even as core::float_to_fp16 /
// float_to_bf16 do; a NaN takes core's quiet NaN instead of the canonical one.
template <DType kOut>
__device__ __forceinline__ std::uint32_t narrow_pair(float lo, float hi) {
  std::uint32_t w;
  if constexpr (kOut == DType::kFloat16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    w = *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    w = *reinterpret_cast<const std::uint32_t*>(&h);
  }
  if (lo != lo || hi != hi) {
    const auto narrow = [](float x) { return kOut == DType::kFloat16 ? core::float_to_fp16(x) : core::float_to_bf16(x); };
    w = narrow(lo) | (std::uint32_t{narrow(hi)} << 16);
  }
  return w;
}

// Lane `sub`'s elements to the output row at `row_base` (elements): one run
// of kRun contiguous elements per 16-dim row.
template <int D, DType kOut, bool kVector>
__device__ __forceinline__ void store_share(void* base, std::int64_t row_base, int sub,
                                            const float (&x)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  constexpr int kSize = kOut == DType::kFloat32 ? 4 : 2;
  constexpr int kWords = G::kRun * kSize / 4;  // 1 .. 8
#pragma unroll
  for (int r = 0; r < G::kRows; ++r) {
    std::uint32_t w[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      if constexpr (kOut == DType::kFloat32) {
        w[k] = __float_as_uint(x[r * G::kRun + k]);
      } else {
        w[k] = narrow_pair<kOut>(x[r * G::kRun + 2 * k], x[r * G::kRun + 2 * k + 1]);
      }
    }
    auto* dst = static_cast<std::uint8_t*>(base) + (row_base + G::dim(sub, r * G::kRun)) * kSize;
    if constexpr (kVector && kWords % 4 == 0) {
#pragma unroll
      for (int k = 0; k < kWords / 4; ++k) {
        reinterpret_cast<uint4*>(dst)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
      }
    } else if constexpr (kVector && kWords == 2) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else if constexpr (kVector && kWords == 1) {
      *reinterpret_cast<std::uint32_t*>(dst) = w[0];
    } else if constexpr (kOut == DType::kFloat32) {
#pragma unroll
      for (int k = 0; k < kWords; ++k) reinterpret_cast<std::uint32_t*>(dst)[k] = w[k];
    } else {  // 16-bit outputs are 2-byte aligned (validate_dequantize)
#pragma unroll
      for (int k = 0; k < 2 * kWords; ++k) {
        reinterpret_cast<std::uint16_t*>(dst)[k] = static_cast<std::uint16_t>(w[k / 2] >> (16 * (k % 2)));
      }
    }
  }
}

// kVector: both output pointers aligned to min(16, kRun * sizeof(out)).
// Dynamic shared memory: 2 D floats per group when p.rotation is dense, else none.
template <int D, DType kOut, bool kVector>
__global__ void __launch_bounds__(kDequantizeThreads, kDequantizeBlocksPerSm) dequantize_kernel(DequantizeParams p) {
  using G = RecordGroup<D>;
  constexpr int kGroups = kDequantizeThreads / G::kLanes;
  extern __shared__ float dense_staging[];
  __shared__ float centroids[core::kMaxCodebookSize];
  if (threadIdx.x == 0) {  // constant indices: a parameter indexed by thread would be copied to the stack
#pragma unroll
    for (int i = 0; i < core::kMaxCodebookSize; ++i) centroids[i] = p.codebook.centroids[i];
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int sub = lane % G::kLanes;
  const unsigned mask = G::mask(lane);
  float* staged = dense_staging + (threadIdx.x / G::kLanes) * (p.rotation != nullptr ? 2 * D : 0);
  const auto records = [&](auto first) {  // the grid-stride loop over records, in decltype(first)
    using I = decltype(first);
    const I work = static_cast<I>(p.num_items * p.layout.num_kv_heads);
    for (I w = first; w < work; w += static_cast<I>(gridDim.x) * kGroups) {
      const DequantizeRecord rec = locate_record<I>(p, w);
      if (!rec.valid) continue;  // the whole group
      float x[G::kElems];  // K, stored, then V (one vector live at a time: 64 registers)
      dequantize_key<D>(p, rec, centroids, sub, mask, staged, x);
      store_share<D, kOut, kVector>(p.keys, rec.row * D, sub, x);
      dequantize_value<D>(p, rec, sub, x);
      store_share<D, kOut, kVector>(p.values, rec.row * D, sub, x);
    }
  };
  const int first = blockIdx.x * kGroups + threadIdx.x / G::kLanes;  // grid <= one wave: no overflow
  if (p.narrow_indices) {
    records(static_cast<std::uint32_t>(first));
  } else {
    records(static_cast<std::int64_t>(first));
  }
}

}  // namespace turboquant::cuda::detail
