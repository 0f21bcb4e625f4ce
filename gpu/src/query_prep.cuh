// Block-cooperative query preparation, bit-identical to decode_reference's
// prepare_query: q -> rotate_forward (Lloyd-Max keys) -> * mul_rn(scale, log2 e).
//
// A warp prepares whole rows, lane l holding dims l + 32 t. Every load of a
// batch of rows is issued before the first is used: with one element per
// thread and iteration, a block of 64 columns (the wide kernel) waited for
// 64 global loads one after another, about 80 us of a 90 us kernel on the
// H200 (docs/PERFORMANCE.md round 16). The Hadamard rotation evaluates
// core::fwht's butterfly network stage by stage: stages h < 32 pair lanes l
// and l ^ h (a shuffle), the others pair a lane's own registers. The same
// butterflies in the same stages give the same bits (hadamard.hpp). A dense
// PiT runs core::rotate_forward itself, one thread per row (slow; for old
// producers only).
#pragma once

#include <cstdint>
#include <type_traits>

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

// fn(load) with load(i) = core::load_element of the query at element i, its
// dtype fixed at compile time (so that the loads of a batch carry no branches).
template <class Fn>
__device__ __forceinline__ void with_query_loader(const DecodeParams& p, Fn&& fn) {
  const void* base = p.query;
  auto of = [base](auto dtype) {
    return [base](std::int64_t i) { return core::load_element(base, decltype(dtype)::value, i); };
  };
  switch (p.query_dtype) {
    case core::DType::kFloat32: fn(of(std::integral_constant<core::DType, core::DType::kFloat32>{})); break;
    case core::DType::kFloat16: fn(of(std::integral_constant<core::DType, core::DType::kFloat16>{})); break;
    default: fn(of(std::integral_constant<core::DType, core::DType::kBFloat16>{})); break;
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
  // Warp w takes rows w, w + kWarps, ...: its batch i rows w + kWarps (kB i + b).
  with_query_loader(p, [&](auto load) {
    for (int first = warp; first < rows; first += kWarps * kB) {
      float x[kB][kPerLane];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int r = first + kWarps * b;
        const std::int64_t base = r < rows ? row_of(r) * D : 0;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int j = lane + 32 * t;
          x[b][t] = r < rows && j < D ? load(base + j) : 0.0f;
        }
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int r = first + kWarps * b;
        if (rotate) {
          if constexpr ((D & (D - 1)) == 0) {
            warp_fwht<D>(x[b], lane);
            constexpr float kNorm = core::inv_sqrt_pow2(D);
#pragma unroll
            for (int t = 0; t < kPerLane; ++t) x[b][t] = core::mul_rn(x[b][t], kNorm);
          }
        }
        if (r >= rows) continue;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int j = lane + 32 * t;
          if (j < D) q[r * D + j] = core::mul_rn(x[b][t], p.query_factor);
        }
      }
    }
  });
  __syncthreads();
}

// The contiguous head rows [first_row, first_row + rows).
template <int D, int kMaxRows, int kWarps>
__device__ void prepare_queries(const DecodeParams& p, std::int64_t first_row, int rows, float* q, float* scratch) {
  prepare_query_rows<D, kMaxRows, kWarps>(p, rows, [=](int k) { return first_row + k; }, q, scratch);
}

}  // namespace turboquant::cuda::detail
