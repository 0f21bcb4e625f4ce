// Block-cooperative query preparation, bit-identical to decode_reference's
// prepare_query: q -> rotate_forward (Lloyd-Max keys) -> * mul_rn(scale, log2 e).
//
// Warps own whole rows, lane l dims l + 32 t. The loads of a batch of rows are
// all issued before the first is used: with one element per thread and
// iteration, a block of 64 columns (the wide kernel) waited for 64 global
// loads one after another, about 30 us of a 91 us kernel on the H200
// (docs/PERFORMANCE.md round 16). Then each warp rotates its rows one at a
// time in registers, evaluating core::fwht's butterfly network stage by stage:
// stages h < 32 pair lanes l and l ^ h (a shuffle), the others pair a lane's
// own registers. The same butterflies in the same stages give the same bits
// (hadamard.hpp). A dense PiT runs core::rotate_forward itself, one thread
// per row (slow; for old producers only). prepare_warp_query_rows does the
// same for the rows of one warp alone, into fp16 (the fast decode's blocks
// of fused heads).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "params.hpp"
#include "turboquant/core/elements.hpp"
#include "turboquant/core/rotation.hpp"

namespace turboquant::cuda::detail {

// Rows in flight per warp (their loads overlap): enough for kMaxRows rows
// over kWarps warps, at most 8 (32 floats per lane at D 128), so that the
// kernels with few rows (strict: a block's heads) hold few registers here.
TQ_HD constexpr int query_rows_in_flight(int max_rows, int warps) {
  const int per_warp = (max_rows + warps - 1) / warps;
  return per_warp < 1 ? 1 : (per_warp > 8 ? 8 : per_warp);
}

// x[b][t] = query element base[b] + lane + 32 t as core::load_element reads
// it, 0 for a row past the block's (valid[b] false) or a dim past D. Only the
// load width depends on the dtype: one branch per batch, none per load, and
// one copy of the code after it.
template <int D, int kB, int kPerLane>
__device__ __forceinline__ void load_query_batch(const DecodeParams& p, const std::int64_t (&base)[kB],
                                                 const bool (&valid)[kB], int lane, float (&x)[kB][kPerLane]) {
  if (p.query_dtype == core::DType::kFloat32) {
#pragma unroll
    for (int b = 0; b < kB; ++b) {
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int j = lane + 32 * t;
        x[b][t] = valid[b] && j < D ? core::load_element(p.query, core::DType::kFloat32, base[b] + j) : 0.0f;
      }
    }
    return;
  }
  std::uint16_t h[kB][kPerLane];
#pragma unroll
  for (int b = 0; b < kB; ++b) {
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int j = lane + 32 * t;
      h[b][t] = valid[b] && j < D ? core::load_u16(p.query, base[b] + j) : std::uint16_t{0};
    }
  }
#pragma unroll
  for (int b = 0; b < kB; ++b) {
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) x[b][t] = core::widen_16(h[b][t], p.query_dtype);
  }
}

// core::fwht of one row held by a warp, x[t] = dim lane + 32 t (D a power of two).
template <int D, int kPerLane>
__device__ __forceinline__ void warp_fwht(float (&x)[kPerLane], int lane) {
  // Stage h pairs (j, j + h) with (j & h) == 0: a + b at j, a - b at j + h.
#pragma unroll
  for (int h = 1; h < D && h < 32; h <<= 1) {
    const bool upper = (lane & h) != 0;  // this lane holds b
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const float other = __shfl_xor_sync(0xffffffffu, x[t], h);
      x[t] = upper ? core::sub_rn(other, x[t]) : core::add_rn(x[t], other);
    }
  }
#pragma unroll
  for (int s = 1; 32 * s < D; s <<= 1) {
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      if (t & s) continue;
      const float a = x[t], b = x[t + s];
      x[t] = core::add_rn(a, b);
      x[t + s] = core::sub_rn(a, b);
    }
  }
}

// One row held by a warp (x[t] = dim lane + 32 t), prepared in place: rotated
// (rotate: Lloyd-Max keys, whose format check gives them a power-of-two
// head_dim), then times query_factor. Every lane of the warp calls it.
template <int D, int kPerLane>
__device__ __forceinline__ void prepare_row_in_registers(const DecodeParams& p, bool rotate, float (&x)[kPerLane],
                                                         int lane) {
  if (rotate) {
    if constexpr ((D & (D - 1)) == 0) {
      warp_fwht<D>(x, lane);
      constexpr float kNorm = core::inv_sqrt_pow2(D);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) x[t] = core::mul_rn(x[t], kNorm);
    }
  }
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) x[t] = core::mul_rn(x[t], p.query_factor);
}

// Writes query rows row_of(0) .. row_of(rows - 1) (indices into the query's
// [T * num_q_heads] head rows) into q[rows][D] (fp32, shared memory), prepared.
// `scratch` is rows*D floats of shared memory used by the dense path. The
// block has kWarps warps and rows <= kMaxRows (more rows are correct, in more
// batches). Ends with a barrier; every thread of the block must call it.
template <int D, int kMaxRows, int kWarps, class RowOf>
__device__ void prepare_query_rows(const DecodeParams& p, int rows, RowOf row_of, float* q, float* scratch) {
  const bool rotate = !p.layout.format.fp8_keys();
  if (rotate && p.rotation != nullptr) {
    for (int i = threadIdx.x; i < rows * D; i += blockDim.x) {
      scratch[i] = core::load_element(p.query, p.query_dtype, row_of(i / D) * D + i % D);
    }
    __syncthreads();
    if (threadIdx.x < rows) {
      core::rotate_forward(core::Rotation{p.rotation}, scratch + threadIdx.x * D, q + threadIdx.x * D, D);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < rows * D; i += blockDim.x) q[i] = core::mul_rn(q[i], p.query_factor);
    __syncthreads();
    return;
  }
  constexpr int kPerLane = (D + 31) / 32;
  constexpr int kB = query_rows_in_flight(kMaxRows, kWarps);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The raw rows into q, kB rows per warp in flight: batch i holds rows
  // kWarps kB i + kWarps b + w (b < kB) of warp w.
  for (int first = 0; first < rows; first += kWarps * kB) {
    int r[kB];
    std::int64_t base[kB];
    bool valid[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      r[b] = first + kWarps * b + warp;
      valid[b] = r[b] < rows;
      base[b] = valid[b] ? row_of(r[b]) * D : 0;
    }
    float x[kB][kPerLane];
    load_query_batch<D>(p, base, valid, lane, x);
#pragma unroll
    for (int b = 0; b < kB; ++b) {
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int j = lane + 32 * t;
        if (valid[b] && j < D) q[r[b] * D + j] = x[b][t];
      }
    }
  }
  __syncwarp();
  // Then each warp's rows in place (row r is warp r % kWarps's in both loops),
  // one at a time; the loop is block-uniform, so every lane of a warp reaches
  // the shuffles.
  for (int first = 0; first < rows; first += kWarps) {
    const int r = first + warp;
    float x[kPerLane];
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int j = lane + 32 * t;
      x[t] = r < rows && j < D ? q[r * D + j] : 0.0f;
    }
    prepare_row_in_registers<D>(p, rotate, x, lane);
    if (r >= rows) continue;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int j = lane + 32 * t;
      if (j < D) q[r * D + j] = x[t];
    }
  }
  __syncthreads();
}

// prepare_query_rows for the rows of one warp, without the block: rows
// row_of(0) .. row_of(rows - 1) (rows <= kRows; up to 8 loads in flight) into
// q16[kRows][D] as fp16, the precision of the mma B fragments made from them
// (the same bits as the fp32 rows rounded there); rows past `rows` are zero.
// Hadamard or FP8 keys only (a dense rotation takes the block's path).
template <int D, int kRows, class RowOf>
__device__ void prepare_warp_query_rows(const DecodeParams& p, int rows, RowOf row_of, __half* q16, int lane) {
  constexpr int kPerLane = (D + 31) / 32;
  constexpr int kB = query_rows_in_flight(kRows, 1);
  const bool rotate = !p.layout.format.fp8_keys();
#pragma unroll 1
  for (int first = 0; first < kRows; first += kB) {
    std::int64_t base[kB];
    bool valid[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      valid[b] = first + b < rows;
      base[b] = valid[b] ? row_of(first + b) * D : 0;
    }
    float x[kB][kPerLane];
    load_query_batch<D>(p, base, valid, lane, x);
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      prepare_row_in_registers<D>(p, rotate, x[b], lane);
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) {
        const int j = lane + 32 * t;
        if (j < D) q16[(first + b) * D + j] = __float2half_rn(valid[b] ? x[b][t] : 0.0f);
      }
    }
  }
  __syncwarp();
}

// The contiguous head rows [first_row, first_row + rows).
template <int D, int kMaxRows, int kWarps>
__device__ void prepare_queries(const DecodeParams& p, std::int64_t first_row, int rows, float* q, float* scratch) {
  prepare_query_rows<D, kMaxRows, kWarps>(p, rows, [=](int k) { return first_row + k; }, q, scratch);
}

}  // namespace turboquant::cuda::detail
