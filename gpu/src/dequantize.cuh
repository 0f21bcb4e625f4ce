// The CUDA dequantize (cuda::dequantize, cuda::dequantize_sequences): a group
// of D/32 lanes per record (item, KV head), an item being one slot of the list
// or one (sequence, position) of the block-table form, laid out as the
// encode's groups are (group_contract.cuh: lane `sub` holds kRun contiguous
// dims of every 16-dim row). The steps are core::dequantize_token_head's, in
// its order, with the group's reductions where it reduces: the centroid (or
// FP8) of each code, the stored norm (AoS: corrected by group_dot16(c, c)),
// c * norm, for the original basis group_fwht and the times 1/sqrt(D) (or, for
// a dense rotation, the fma chains of core::rotate_inverse over the vector
// staged in shared memory); values fma(code, scale, zero). So the fp32
// outputs are dequantize_reference's bits (compiled with --fmad=false, like
// the other bit-exact kernels); fp16 / bf16 outputs are those rounded to
// nearest even, as core::store_element rounds them (the conversion
// instructions, with core's quiet NaN).
//
// What makes it fast (each step measured, docs/PERFORMANCE.md):
// - the key and value bit widths are compile-time constants of the loop
//   (one kernel per pair), so every shift and offset is a constant;
// - a lane loads the 32 codes of its 32-dim chunk of each code array in the
//   widest loads its address allows (CodeChunk: one to four 16-byte loads on
//   SoA, whose records are 16-byte aligned), and a transpose through shuffles
//   gives it its runs of the contract's layout (CodeRuns);
// - key codes become floats through the block's centroids in shared memory
//   (conflict-free: 8 or 16 words) or its FP8 table, value codes
//   arithmetically;
// - every load of a record (codes, norm, scale, zero) is issued before its
//   first store, so a record waits for memory once;
// - records go in output-row order, so a warp's groups write consecutive rows;
// - the loop is warp-uniform (a group past the end computes on a dummy record
//   and stores nothing), so the group reductions are plain full-warp shuffles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "byte_stores.cuh"
#include "dequantize_codes.cuh"
#include "dequantize_params.hpp"
#include "fast_divisor.hpp"
#include "group_contract.cuh"
#include "turboquant/core/fp8.hpp"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kDequantizeThreads = 128;
// Resident blocks per SM: D 128 fits 64 registers (32 warps per SM); D 64
// (8-element runs) and D 256 (16 rows of raw codes per field) need more
// registers (85 at 6 blocks).
template <int D>
inline constexpr int kDequantizeBlocksPerSm = D == 128 ? 8 : 6;

// FP8 keys' floats, one per byte, per block (conversions differ per flavour;
// the table is core::fp8_to_float's). Lloyd-Max keys read the block's
// centroids (8 or 16 floats: the lanes of a warp that read different codes hit
// different banks, so every lookup is one shared-memory wavefront); value
// codes become floats arithmetically (value_code_float).
struct Fp8Table {
  float value[256];
};

__device__ __forceinline__ void build_fp8_table(const DequantizeParams& p, Fp8Table& t) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    t.value[i] = core::fp8_to_float(p.layout.format.fp8_format, static_cast<std::uint8_t>(i));
  }
}

// The exact float of a code below 2^23: 2^23 + code has the code in its low
// mantissa bits, and subtracting 2^23 is exact (no I2F, no table).
__device__ __forceinline__ float value_code_float(std::uint32_t code) {
  return __uint_as_float(0x4b000000u | code) - 8388608.0f;
}

// Where the group's record comes from (its output row is the record index w).
struct DequantizeRecord {
  const std::uint8_t* block;
  int t, h;
  bool valid;  // false past seq_lens[b] (block-table form) or past the work
};

__device__ __forceinline__ DequantizeRecord dummy_record(const DequantizeParams& p) {
  return {p.cache, 0, 0, false};  // slot 0 of block 0: read, never stored
}

// n / d in the index type: FastDivisor's multiply-high for 32-bit indices.
template <class I>
__device__ __forceinline__ I quotient(I n, const FastDivisor& d) {
  if constexpr (std::is_same_v<I, std::uint32_t>) {
    return d.div(n);
  } else {
    return n / static_cast<I>(d.divisor);
  }
}

// Record w in the order of the output rows (row = w), so that a warp's groups
// write consecutive rows: the list form w = item * heads + h; the block-table
// form w = (b * heads + h) * max_seq + j, consecutive positions of one head.
// I: the index type, std::uint32_t when the work and the cache's slots fit
// (DequantizeParams::narrow_indices; 64-bit divisions are long software
// routines), else std::int64_t.
template <class I>
__device__ __forceinline__ DequantizeRecord locate_record(const DequantizeParams& p, I w) {
  const I heads = static_cast<I>(p.heads_div.divisor);
  const I bs = static_cast<I>(p.block_size_div.divisor);
  I block, t;
  int h;
  if (p.slots != nullptr) {
    const I item = quotient(w, p.heads_div);
    h = static_cast<int>(w - item * heads);
    const I slot = static_cast<I>(p.slots[item]);
    block = quotient(slot, p.block_size_div);
    t = slot - block * bs;
  } else {
    const I max_seq = static_cast<I>(p.max_seq_div.divisor);
    const I bh = quotient(w, p.max_seq_div);
    const I j = w - bh * max_seq;
    const I b = quotient(bh, p.heads_div);
    h = static_cast<int>(bh - b * heads);
    if (j >= static_cast<I>(p.seq_lens[b])) return dummy_record(p);
    const I jb = quotient(j, p.block_size_div);
    block = static_cast<I>(p.block_table[std::int64_t(b) * p.max_blocks_per_seq + jb]);
    t = j - jb * bs;
  }
  return {p.cache + p.layout.block_base(std::int64_t(block)), static_cast<int>(t), h, true};
}

__device__ __forceinline__ DequantizeRecord locate_record(const DequantizeParams& p, std::int64_t w) {
  if (w >= p.work) return dummy_record(p);
  return p.narrow_indices ? locate_record<std::uint32_t>(p, static_cast<std::uint32_t>(w))
                          : locate_record<std::int64_t>(p, w);
}

__device__ __forceinline__ std::uint32_t load_u16(const std::uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}

// An fp16 field as fp32: the conversion instruction is exact for every finite
// value; inf and NaN take core::fp16_to_float's bits.
__device__ __forceinline__ float fp16_value(std::uint32_t bits) {
  const auto h = static_cast<std::uint16_t>(bits);
  return (h & 0x7c00u) == 0x7c00u ? core::fp16_to_float(h) : __half2float(__ushort_as_half(h));
}

// K of the record in lane `sub`'s elements from its loaded codes:
// core::dequantize_token_head's key half. Returns whether every element is
// finite (then the narrowing needs no NaN check): true for Lloyd-Max keys
// with a finite norm (centroids and the checked dense rotation are finite,
// and the corrected norm divides by at least 1e-8), false for FP8 keys.
// `staged` (2 D floats of shared memory per group) is used only by a dense
// rotation.
template <int D, int KB>
__device__ __forceinline__ bool dequantize_key(const DequantizeParams& p, const core::BlockLayout& l,
                                               const CodeRuns<D, KB>& codes, std::uint32_t norm_bits,
                                               const float* key_floats, int sub, float* staged,
                                               float (&k)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  codes.to_floats([&](std::uint32_t c) { return key_floats[c]; }, k);  // centroids or FP8 values
  if constexpr (KB == core::kFp8KeyBits) {
    return false;  // stored unrotated: the same values in either basis
  } else {
    const float stored = fp16_value(norm_bits);
    const float norm = l.format.norm_corrected_at_decode()
                           ? core::decoded_key_norm(stored, group_dot16<D>(k, k, kFullWarp), true)
                           : stored;
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) k[x] = core::mul_rn(k[x], norm);
    const bool finite = isfinite(stored);
    if (!p.original) return finite;
    if (p.rotation == nullptr) {  // core::rotate_inverse of the Hadamard rotation: fwht, then times 1/sqrt(D)
      group_fwht<D>(k, sub, kFullWarp);
      constexpr float kInvSqrt = core::inv_sqrt_pow2(D);
#pragma unroll
      for (int x = 0; x < G::kElems; ++x) k[x] = core::mul_rn(k[x], kInvSqrt);
      return finite;
    }
    // Dense: out[i] = sum over j of in[j] * pit[i][j], an fma chain from +0 in
    // j order; in and out staged (a loop over a register array would put k in
    // local memory).
    float* out = staged + D;
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) staged[G::dim(sub, x)] = k[x];
    __syncwarp();
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
    __syncwarp();  // before the next record overwrites `staged`
    return finite;
  }
}

// V of the record: fma(code, scale, zero) per element. Returns whether every
// element is finite (codes are at most 15, so a finite scale and zero give
// finite values).
template <int D, int VB>
__device__ __forceinline__ bool dequantize_value(const CodeRuns<D, VB>& codes, std::uint32_t scale_bits,
                                                 std::uint32_t zero_bits, int sub, float (&v)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
  codes.to_floats(value_code_float, v);
  const float scale = fp16_value(scale_bits);
  const float zero = fp16_value(zero_bits);
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) v[x] = core::dequant_value(v[x], scale, zero);  // v holds the exact codes
  return isfinite(scale) && isfinite(zero);
}

// Two outputs narrowed to kOut as one word (lo in the low half): the
// conversion instructions round to nearest even as core::float_to_fp16 /
// float_to_bf16 do.
template <DType kOut>
__device__ __forceinline__ std::uint32_t narrow_pair(float lo, float hi) {
  if constexpr (kOut == DType::kFloat16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

// The pair's word with core's quiet NaN where an element is NaN (the
// instructions give the canonical one).
template <DType kOut>
__device__ __noinline__ std::uint32_t narrow_pair_nan(float lo, float hi) {
  const auto narrow = [](float x) { return kOut == DType::kFloat16 ? core::float_to_fp16(x) : core::float_to_bf16(x); };
  return narrow(lo) | (std::uint32_t{narrow(hi)} << 16);
}

// Lane `sub`'s elements to the output row at `row_base` (elements) when
// `valid`; every lane of the warp calls it (the 16-bit D 128 path exchanges
// words). `finite`: no element is NaN, so no NaN is looked for. `align`: the
// outputs' base addresses or-ed (store_bytes' `known`: row and run offsets are
// multiples of the widths chosen).
// Stores: one run of kRun contiguous elements per 16-dim row, as wide as
// `align` allows; for 16-bit outputs of D 128 (8-byte runs) the lane pairs
// (sub, sub ^ 1) swap the runs of two rows so that each lane stores 16 bytes
// (the even lane row 2q's 8 dims, the odd one row 2q + 1's): half the store
// instructions, each covering twice the bytes.
template <int D, DType kOut>
__device__ __forceinline__ void store_record(void* base, std::int64_t row_base, int sub,
                                             const float (&x)[RecordGroup<D>::kElems], bool finite, bool valid,
                                             std::uintptr_t align) {
  using G = RecordGroup<D>;
  constexpr int kSize = kOut == DType::kFloat32 ? 4 : 2;
  constexpr int kWords = G::kRun * kSize / 4;  // per row: 1 .. 8
  std::uint32_t w[G::kRows][kWords];
#pragma unroll
  for (int r = 0; r < G::kRows; ++r) {
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      if constexpr (kOut == DType::kFloat32) {
        w[r][k] = __float_as_uint(x[r * G::kRun + k]);
      } else {
        const float lo = x[r * G::kRun + 2 * k], hi = x[r * G::kRun + 2 * k + 1];
        w[r][k] = narrow_pair<kOut>(lo, hi);
        if (!finite && (lo != lo || hi != hi)) w[r][k] = narrow_pair_nan<kOut>(lo, hi);
      }
    }
  }
  auto* out = static_cast<std::uint8_t*>(base);
  if constexpr (kSize == 2 && kWords == 2) {
    const bool odd = sub & 1;
#pragma unroll
    for (int q = 0; q < G::kRows / 2; ++q) {
      const std::uint32_t s0 = odd ? w[2 * q][0] : w[2 * q + 1][0];  // what the partner stores
      const std::uint32_t s1 = odd ? w[2 * q][1] : w[2 * q + 1][1];
      const std::uint32_t r0 = __shfl_xor_sync(kFullWarp, s0, 1);
      const std::uint32_t r1 = __shfl_xor_sync(kFullWarp, s1, 1);
      const std::uint32_t both[4] = {odd ? r0 : w[2 * q][0], odd ? r1 : w[2 * q][1], odd ? w[2 * q + 1][0] : r0,
                                     odd ? w[2 * q + 1][1] : r1};
      const int dim = odd ? G::dim(sub - 1, (2 * q + 1) * G::kRun) : G::dim(sub, 2 * q * G::kRun);
      if (valid) store_bytes<16>(out + (row_base + dim) * kSize, both, align);
    }
  } else {
#pragma unroll
    for (int r = 0; r < G::kRows; ++r) {
      if (valid) store_bytes<4 * kWords>(out + (row_base + G::dim(sub, r * G::kRun)) * kSize, w[r], align);
    }
  }
}

// What one record's loads bring: its code chunks and fp16 fields, all issued
// together.
template <int KB, int VB>
struct RecordLoads {
  CodeChunk<KB> key;
  CodeChunk<VB> value;
  std::uint32_t norm_bits, scale_bits, zero_bits;
  bool valid;
};

template <int KB, int VB>
__device__ __forceinline__ RecordLoads<KB, VB> load_record(const core::BlockLayout& l, const DequantizeRecord& rec,
                                                           int sub) {
  RecordLoads<KB, VB> r;
  r.key.load(rec.block + l.key_data_offset(rec.t, rec.h), sub);
  r.value.load(rec.block + l.value_data_offset(rec.t, rec.h), sub);
  r.norm_bits =
      KB == core::kFp8KeyBits ? 0u : load_u16(rec.block + l.meta_field_offset(rec.t, rec.h, core::MetaField::kKeyNorm));
  r.scale_bits = load_u16(rec.block + l.meta_field_offset(rec.t, rec.h, core::MetaField::kValueScale));
  r.zero_bits = load_u16(rec.block + l.meta_field_offset(rec.t, rec.h, core::MetaField::kValueZero));
  r.valid = rec.valid;
  return r;
}

// The grid-stride loop over records for one (key bits, value bits): KB and VB
// are constants here, so are the layout's sizes and offsets. (Issuing the
// next record's loads before this one's work was measured slower at every
// occupancy that leaves it unspilled: docs/PERFORMANCE.md, round 11.)
template <int D, core::LayoutKind kLayout, DType kOut, int KB, int VB>
__device__ __forceinline__ void dequantize_records(const DequantizeParams& p, const float* key_floats,
                                                   float* staged) {
  using G = RecordGroup<D>;
  constexpr int kGroups = kDequantizeThreads / G::kLanes;
  const core::Format& rf = p.layout.format;
  const core::BlockLayout l{core::Format{KB, VB, rf.norm_correction, D, kLayout, rf.fp8_format}, p.layout.block_size,
                            p.layout.num_kv_heads};
  // Both outputs' address bits, so that store_bytes takes the widths both allow.
  const std::uintptr_t align = address_of(p.keys) | address_of(p.values);
  const int sub = threadIdx.x % G::kLanes;
  const int group_in_warp = threadIdx.x % 32 / G::kLanes;
  const std::int64_t stride = std::int64_t{gridDim.x} * kGroups;
  std::int64_t warp_first = std::int64_t{blockIdx.x} * kGroups + threadIdx.x / 32 * (32 / G::kLanes);
  // The loop runs while any group of the warp has a record (warp-uniform).
  for (; warp_first < p.work; warp_first += stride) {
    const std::int64_t w = warp_first + group_in_warp;  // the record, and its output row
    const RecordLoads<KB, VB> cur = load_record<KB, VB>(l, locate_record(p, w), sub);
    float x[G::kElems];  // K, stored, then V (one vector live at a time)
    {
      CodeRuns<D, KB> key_codes;
      key_codes.from_chunk(cur.key, sub);
      const bool key_finite = dequantize_key<D, KB>(p, l, key_codes, cur.norm_bits, key_floats, sub, staged, x);
      store_record<D, kOut>(p.keys, w * D, sub, x, key_finite, cur.valid, align);
    }
    CodeRuns<D, VB> value_codes;
    value_codes.from_chunk(cur.value, sub);
    const bool value_finite = dequantize_value<D, VB>(value_codes, cur.scale_bits, cur.zero_bits, sub, x);
    store_record<D, kOut>(p.values, w * D, sub, x, value_finite, cur.valid, align);
  }
}

// One kernel per (head_dim, layout, output dtype, key bits, value bits): with
// the bit widths dispatched inside one kernel, its six loops shared hoisted
// values and spilled them. Dynamic shared memory: 2 D floats per group when
// p.rotation is dense, else none.
template <int D, core::LayoutKind kLayout, DType kOut, int KB, int VB>
__global__ void __launch_bounds__(kDequantizeThreads, kDequantizeBlocksPerSm<D>) dequantize_kernel(DequantizeParams p) {
  using G = RecordGroup<D>;
  extern __shared__ float dense_staging[];
  __shared__ float centroids[core::kMaxCodebookSize];
  __shared__ Fp8Table fp8;
  if constexpr (KB == core::kFp8KeyBits) {
    build_fp8_table(p, fp8);
  } else if (threadIdx.x == 0) {  // constant indices: a parameter indexed by thread would be copied to the stack
#pragma unroll
    for (int i = 0; i < core::kMaxCodebookSize; ++i) centroids[i] = p.codebook.centroids[i];
  }
  __syncthreads();
  float* staged = dense_staging + (threadIdx.x / G::kLanes) * (p.rotation != nullptr ? 2 * D : 0);
  dequantize_records<D, kLayout, kOut, KB, VB>(p, KB == core::kFp8KeyBits ? fp8.value : centroids, staged);
}

}  // namespace turboquant::cuda::detail
