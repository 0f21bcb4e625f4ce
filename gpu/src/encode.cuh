// Encode (vLLM's store) on the GPU, byte-identical to encode_reference /
// core::encode_token_head, for both layouts (every address from
// core::BlockLayout; AoS slots are only 2-byte aligned, which store_bytes
// handles) and both FP8 flavours. A group of D/32 lanes per (token, KV head), laid
// out as group_contract.cuh describes: every lane loads one vector per 16-dim
// row and owns whole dot-lanes, so the reductions are short. The element-wise
// steps call core/ (bucketize through core::bucketize_on_grid, which equals
// Codebook::bucketize, or a binary search; fp8 and fp16 narrowing, write_meta,
// offsets); the value code is value_code_of_quotient with a saturating
// conversion; the packing is core::pack_codes' bit order (code d at bit
// bits*d) done on words.
//
// The divisions by the key's norm and by the value scale share one divisor per
// vector, so they go through core::div_rn_by_reciprocal (div_rn's bits, four
// FMAs and a multiply) when the operands are in its range, else div_rn.
// The reductions of core/quantize.hpp (dot16, the min/max scans) are the
// group's (group_contract.cuh); their finishing steps are core's
// (key_denominator, stored_key_norm, value_params of the range).
#pragma once

#include "byte_stores.cuh"
#include "group_contract.cuh"
#include "mma_utils.cuh"  // load_chunk
#include "params.hpp"
#include "turboquant/core/elements.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

// The dense-rotation path rotates in one lane per vector (slow, old producers
// only), so its blocks are small.
template <bool kDense>
inline constexpr int kEncodeThreads = kDense ? 32 : 256;

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

// The rare paths (operands outside the shared-reciprocal range, a codebook the
// bucket grid cannot separate) are calls rather than 32 inlined copies each,
// which keeps the kernel's code small for the instruction cache.
__device__ __noinline__ float div_rn_call(float a, float b) { return core::div_rn(a, b); }
__device__ __noinline__ int value_code_call(float v, core::ValueParams vp, int bits) {
  return core::value_code(v, vp, bits);
}
__device__ __noinline__ int bucketize_call(const core::Codebook& cb, float y) { return bucketize_sorted(cb, y); }

template <DType kT>
inline constexpr int kInputBytes = kT == DType::kFloat32 ? 4 : 2;

template <DType kT>
__device__ __forceinline__ float widen(std::uint32_t bits) {
  if constexpr (kT == DType::kFloat32) return core::bits_float(bits);
  const auto h = static_cast<std::uint16_t>(bits);
  return kT == DType::kFloat16 ? core::fp16_to_float(h) : core::bf16_to_float(h);
}

// One lane's share of a K or V vector as loaded: kRun contiguous elements per
// row, packed as in memory (two 16-bit elements per word). One load per row
// when the input allows (kVector: base pointers aligned to the run).
template <int D, DType kT>
struct RawShare {
  static constexpr int kRowBytes = RecordGroup<D>::kRun * kInputBytes<kT>;  // 4, 8, 16 or 32
  std::uint32_t w[RecordGroup<D>::kRows][kRowBytes / 4];
};

template <int D, DType kT, bool kVector>
__device__ __forceinline__ void load_share(const void* base, std::int64_t first, int sub, RawShare<D, kT>& raw) {
  using G = RecordGroup<D>;
  constexpr int kBytes = RawShare<D, kT>::kRowBytes;
  const char* row0 = static_cast<const char*>(base) + (first + G::kRun * sub) * kInputBytes<kT>;
#pragma unroll
  for (int r = 0; r < G::kRows; ++r) {
    const char* src = row0 + r * 16 * kInputBytes<kT>;
    if constexpr (kVector) {
      load_chunk<kBytes, (kBytes < 16 ? kBytes : 16)>(reinterpret_cast<const std::uint8_t*>(src), raw.w[r]);
    } else {
#pragma unroll
      for (int k = 0; k < kBytes / 4; ++k) {
        if constexpr (kT == DType::kFloat32) {
          raw.w[r][k] = reinterpret_cast<const std::uint32_t*>(src)[k];
        } else {
          const auto* h = reinterpret_cast<const std::uint16_t*>(src);
          raw.w[r][k] = h[2 * k] | (static_cast<std::uint32_t>(h[2 * k + 1]) << 16);
        }
      }
    }
  }
}

template <int D, DType kT>
__device__ __forceinline__ void widen_share(const RawShare<D, kT>& raw, float (&out)[RecordGroup<D>::kElems]) {
  constexpr int kPerWord = 4 / kInputBytes<kT>;
#pragma unroll
  for (int x = 0; x < RecordGroup<D>::kElems; ++x) {
    const std::uint32_t word = raw.w[x / RecordGroup<D>::kRun][x % RecordGroup<D>::kRun / kPerWord];
    if constexpr (kT == DType::kBFloat16) {  // bf16 is the top half of an fp32: one shift or mask
      out[x] = core::bits_float(x % 2 ? word & 0xffff0000u : word << 16);
    } else {
      out[x] = widen<kT>(word >> (32 / kPerWord * (x % kPerWord)));
    }
  }
}

// Codes of one lane's elements into the vector's code bytes (dim order), one
// shared-memory store per row.
template <int D>
__device__ __forceinline__ void stage_codes(std::uint8_t* codes, int sub, const int (&c)[RecordGroup<D>::kElems]) {
  using G = RecordGroup<D>;
#pragma unroll
  for (int r = 0; r < G::kRows; ++r) {
    std::uint32_t w[(G::kRun + 3) / 4] = {};
#pragma unroll
    for (int e = 0; e < G::kRun; ++e) w[e / 4] |= static_cast<std::uint32_t>(c[r * G::kRun + e]) << (8 * (e % 4));
    std::uint8_t* dst = codes + 16 * r + G::kRun * sub;
    if constexpr (G::kRun == 8) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else if constexpr (G::kRun == 4) {
      *reinterpret_cast<std::uint32_t*>(dst) = w[0];
    } else {
      *reinterpret_cast<std::uint16_t*>(dst) = static_cast<std::uint16_t>(w[0]);
    }
  }
}

// Lane `sub` packs the code bytes of dims [32 sub, 32 sub + 32) (code d at bit
// bits*d, as core::pack_codes) and stores them at record + 4 * bits * sub.
template <int kBits>
__device__ __forceinline__ void pack_and_store(const std::uint8_t* codes, int sub, std::uint8_t* record) {
  std::uint32_t c[8];  // code bytes, four per word
  const uint4* src = reinterpret_cast<const uint4*>(codes + 32 * sub);
  const uint4 c0 = src[0];
  const uint4 c1 = src[1];
  c[0] = c0.x, c[1] = c0.y, c[2] = c0.z, c[3] = c0.w, c[4] = c1.x, c[5] = c1.y, c[6] = c1.z, c[7] = c1.w;
  std::uint8_t* dst = record + 4 * kBits * sub;
  if constexpr (kBits == 8) {
    store_bytes<32>(dst, c, address_of(dst));
  } else if constexpr (kBits == 4) {
    std::uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Bytes 0 and 2 of c | c >> 4 hold c0 | c1 << 4 and c2 | c3 << 4 (codes < 16).
      const std::uint32_t lo = c[2 * k] | (c[2 * k] >> 4);
      const std::uint32_t hi = c[2 * k + 1] | (c[2 * k + 1] >> 4);
      w[k] = __byte_perm(lo, hi, 0x6420);
    }
    store_bytes<16>(dst, w, address_of(dst));
  } else {
    static_assert(kBits == 3, "3, 4 or 8 bits");
    std::uint32_t g[4];  // 24-bit groups of 8 codes
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      std::uint32_t v = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) v |= ((c[2 * k + j / 4] >> (8 * (j % 4))) & 7u) << (3 * j);
      g[k] = v;
    }
    const std::uint32_t w[3] = {g[0] | (g[1] << 24), (g[1] >> 8) | (g[2] << 16), (g[2] >> 16) | (g[3] << 8)};
    store_bytes<12>(dst, w, address_of(dst));
  }
}

__device__ __forceinline__ void pack_and_store_any(int bits, const std::uint8_t* codes, int sub, std::uint8_t* record) {
  if (bits == 8) {
    pack_and_store<8>(codes, sub, record);
  } else if (bits == 4) {
    pack_and_store<4>(codes, sub, record);
  } else {
    pack_and_store<3>(codes, sub, record);
  }
}

// core::reciprocal_dividend_in_range for every key element, given a divisor in
// range: the upper bound then holds by itself (|k[d]| <= ||k|| < denom <= 2^40;
// a larger element would have made the norm overflow), so only the lower bound
// is tested: 2|a| - 1 as an unsigned (zero wraps to the top) against the
// threshold's. fp16 inputs always pass (their smallest nonzero magnitude is 2^-24).
template <int D, DType kT>
__device__ __forceinline__ bool dividends_in_range(const float (&a)[RecordGroup<D>::kElems]) {
  if constexpr (kT == DType::kFloat16) return true;
  std::uint32_t smallest = 0xffffffffu;
#pragma unroll
  for (int x = 0; x < RecordGroup<D>::kElems; ++x) smallest = min(smallest, 2u * core::float_bits(a[x]) - 1u);
  return smallest >= 2u * core::float_bits(core::kReciprocalDividendMin) - 1u;
}

// code = value_code_of_quotient(q, bits): cvt.rzi truncates toward zero,
// saturates and maps NaN to 0, so clamping to [0, levels] gives its result.
__device__ __forceinline__ int value_code_of_quotient_rz(float q, int bits) {
  return min(max(__float2int_rz(core::add_rn(q, 0.5f)), 0), (1 << bits) - 1);
}

// One (token, KV head): the key's and the value's codes and metadata.
template <int D, core::LayoutKind kLayout, core::Fp8Format kFp8, bool kDense, DType kT, bool kVector>
__device__ __forceinline__ void encode_vector(const EncodeParams& p, const core::Codebook& cb,
                                              const core::BucketCell* cells, std::uint8_t* codes, float* dense,
                                              std::int64_t item, int sub, int leader, unsigned mask) {
  using G = RecordGroup<D>;
  // The layout kind as a constant, so that BlockLayout's address arithmetic
  // folds to one layout's (a run-time kind cost SoA 10-16% of its time).
  core::BlockLayout l = p.layout;
  l.format.layout = kLayout;
  const core::Format& f = l.format;
  const std::int64_t token = item / l.num_kv_heads;
  const int h = static_cast<int>(item % l.num_kv_heads);
  const std::int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;  // vLLM's padding convention; the whole group skips it
  std::uint8_t* block = p.cache + l.block_base(slot / l.block_size);
  const int t = static_cast<int>(slot % l.block_size);
  int code[G::kElems];

  {
    RawShare<D, kT> raw;
    load_share<D, kT, kVector>(p.keys, item * D, sub, raw);
    float k[G::kElems];
    widen_share<D, kT>(raw, k);
    if (f.fp8_keys()) {
      // The flavour is a template parameter: the e4b15 conversion in the
      // common instances changed their code generation (SoA encode +5-12%).
      if constexpr (kFp8 == core::Fp8Format::kE4b15) {
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) code[x] = core::float_to_fp8_e4b15(k[x]);
      } else {
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) code[x] = core::float_to_fp8_e4m3(k[x]);
      }
    } else {
      const core::KeyDenominator kd = core::key_denominator(group_dot16<D>(k, k, mask));
      const float norm = kd.norm;
      const float denom = kd.denom;
      float y[G::kElems];
      if (__all_sync(mask, core::reciprocal_divisor_in_range(denom) && dividends_in_range<D, kT>(k))) {
        const float recip = core::div_rn(1.0f, denom);
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) y[x] = core::div_rn_by_reciprocal(k[x], denom, recip);
      } else {
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) y[x] = div_rn_call(k[x], denom);
      }
      if constexpr (kDense) {
        float* xs = dense;
        float* ys = xs + D;
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) xs[G::dim(sub, x)] = y[x];
        __syncwarp(mask);
        if (sub == 0) core::rotate_forward(core::Rotation{p.rotation}, xs, ys, D);
        __syncwarp(mask);
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) y[x] = ys[G::dim(sub, x)];
      } else {
        group_fwht<D>(y, sub, mask);
        const float scale = core::inv_sqrt_pow2(D);
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) y[x] = core::mul_rn(y[x], scale);
      }
      if (p.grid.usable) {  // kernel-uniform
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) code[x] = core::bucketize_on_grid(p.grid, cells, y[x]);
      } else {
#pragma unroll
        for (int x = 0; x < G::kElems; ++x) code[x] = bucketize_call(cb, y[x]);
      }
#pragma unroll
      for (int x = 0; x < G::kElems; ++x) y[x] = cb.centroids[code[x]];  // c[idx], as encode_token_head reuses y
      // The correction's dot16 (shuffles of the whole group) only when it is used.
      const float stored =
          f.norm_folded_at_store() ? core::stored_key_norm(norm, group_dot16<D>(y, y, mask), true) : norm;
      if (sub == 0) core::write_meta(l, block, t, h, core::MetaField::kKeyNorm, stored);
    }
    stage_codes<D>(codes, sub, code);
    __syncwarp(mask);
    pack_and_store_any(f.key_bits, codes, sub, block + l.key_data_offset(t, h));
    __syncwarp(mask);  // the code bytes are reused for the values
  }

  // Loading the value together with the key (before the key's stores, which
  // the compiler must assume may alias it) measured no faster and took 45 more
  // registers.
  float v[G::kElems];
  {
    RawShare<D, kT> raw;
    load_share<D, kT, kVector>(p.values, item * D, sub, raw);
    widen_share<D, kT>(raw, v);
  }
  const float2 extremes = group_min_max<D>(v, sub, mask, leader);
  const core::ValueParams vp = core::value_params(core::ValueRange{extremes.x, extremes.y}, f.value_bits);
  // Every lane of the group sees the same scale, so the branch is group-uniform.
  // The dividends v - zero need no range check: they are NaN (code 0 either
  // way), or at most scale * levels (in range), or below kReciprocalDividendMin,
  // where both quotients are under 2^-38 and round to code 0.
  if (core::reciprocal_divisor_in_range(vp.scale)) {
    const float recip = core::div_rn(1.0f, vp.scale);
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) {
      const float q = core::div_rn_by_reciprocal(core::sub_rn(v[x], vp.zero), vp.scale, recip);
      code[x] = value_code_of_quotient_rz(q, f.value_bits);
    }
  } else {
#pragma unroll
    for (int x = 0; x < G::kElems; ++x) code[x] = value_code_call(v[x], vp, f.value_bits);
  }
  stage_codes<D>(codes, sub, code);
  __syncwarp(mask);
  pack_and_store_any(f.value_bits, codes, sub, block + l.value_data_offset(t, h));
  if (sub == 0) core::write_meta(l, block, t, h, core::MetaField::kValueScale, vp.scale);
  if (sub == G::kLanes - 1) core::write_meta(l, block, t, h, core::MetaField::kValueZero, vp.zero);
  __syncwarp(mask);  // the code bytes are reused for the next vector
}

// A fixed grid (about one wave, chosen by the launcher) walks over the
// (token, KV head) items, so the per-block setup (codebook, bucket cells) is
// paid once per block, not once per 64 items.
// Three blocks of 256 threads per SM (at most 80 registers): what the kernel
// used before the AoS layout existed; left to itself ptxas gave some instances
// 94 registers and two blocks, and SoA encode lost 6-12% (H200, 2026-12-01).
template <bool kDense>
inline constexpr int kEncodeMinBlocks = kDense ? 1 : 3;

template <int D, core::LayoutKind kLayout, core::Fp8Format kFp8, bool kDense, DType kT, bool kVector>
__global__ void __launch_bounds__(kEncodeThreads<kDense>, kEncodeMinBlocks<kDense>) encode_kernel(EncodeParams p) {
  using G = RecordGroup<D>;
  constexpr int kVectors = kEncodeThreads<kDense> / G::kLanes;
  constexpr int kCodeStride = D + 16;  // per vector; the 16 spreads the groups over the banks
  __shared__ core::Codebook cb;
  __shared__ __align__(16) std::uint8_t code_smem[kVectors * kCodeStride];
  __shared__ __align__(16) float dense_smem[kDense ? kVectors * 2 * D : 1];
  __shared__ core::BucketCell cells[core::BucketGrid::kCells];
  if (threadIdx.x == 0) cb = p.codebook;
  if (p.grid.usable) {
    for (int c = threadIdx.x; c < core::BucketGrid::kCells; c += blockDim.x) {
      cells[c] = core::bucket_cell(p.grid, p.codebook, c);
    }
  }
  __syncthreads();

  const int lane = threadIdx.x & 31;
  const int sub = lane & (G::kLanes - 1);
  const int vec = threadIdx.x / G::kLanes;
  std::uint8_t* codes = code_smem + vec * kCodeStride;
  float* dense = dense_smem + (kDense ? vec * 2 * D : 0);
  const std::int64_t items = p.num_tokens * p.layout.num_kv_heads;
  for (std::int64_t item = std::int64_t{blockIdx.x} * kVectors + vec; item < items;
       item += std::int64_t{gridDim.x} * kVectors) {
    encode_vector<D, kLayout, kFp8, kDense, kT, kVector>(p, cb, cells, codes, dense, item, sub, lane - sub,
                                                         G::mask(lane));
  }
}

}  // namespace turboquant::cuda::detail
