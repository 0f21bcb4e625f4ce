// Block-cooperative query preparation, bit-identical to decode_reference's
// prepare_query: q -> rotate_forward (Lloyd-Max keys) -> * mul_rn(scale, log2 e).
// The Hadamard rotation evaluates core::fwht's butterfly network with one
// thread per butterfly and a barrier per stage: the same butterflies in the
// same stages give the same bits (hadamard.hpp). A dense PiT runs
// core::rotate_forward itself, one thread per row (slow; for old producers only).
#pragma once

#include "params.hpp"
#include "turboquant/core/elements.hpp"
#include "turboquant/core/rotation.hpp"

namespace turboquant::cuda::detail {

// Writes query rows row_of(0) .. row_of(rows - 1) (indices into the query's
// [T * num_q_heads] head rows) into q[rows][D] (fp32, shared memory), prepared.
// `scratch` is rows*D floats of shared memory used by the dense path. Ends with
// a barrier; every thread of the block must call it.
template <int D, class RowOf>
__device__ void prepare_query_rows(const DecodeParams& p, int rows, RowOf row_of, float* q, float* scratch) {
  const bool rotate = !p.layout.format.fp8_keys();
  const bool dense = rotate && p.rotation != nullptr;
  float* raw = dense ? scratch : q;
  for (int i = threadIdx.x; i < rows * D; i += blockDim.x) {
    raw[i] = core::load_element(p.query, p.query_dtype, row_of(i / D) * D + i % D);
  }
  __syncthreads();
  if (dense) {
    if (threadIdx.x < rows) {
      core::rotate_forward(core::Rotation{p.rotation}, raw + threadIdx.x * D, q + threadIdx.x * D, D);
    }
    __syncthreads();
  } else if (rotate) {
    // core::fwht: stage h pairs (j, j + h) with (j & h) == 0.
    for (int h = 1; h < D; h <<= 1) {
      for (int i = threadIdx.x; i < rows * (D / 2); i += blockDim.x) {
        const int r = i / (D / 2);
        const int k = i % (D / 2);
        const int j = ((k & ~(h - 1)) << 1) | (k & (h - 1));  // k with a 0 inserted at bit log2(h)
        float* x = q + r * D;
        const float a = x[j];
        const float b = x[j + h];
        x[j] = core::add_rn(a, b);
        x[j + h] = core::sub_rn(a, b);
      }
      __syncthreads();
    }
    const float norm = core::inv_sqrt_pow2(D);
    for (int i = threadIdx.x; i < rows * D; i += blockDim.x) q[i] = core::mul_rn(q[i], norm);
    __syncthreads();
  }
  for (int i = threadIdx.x; i < rows * D; i += blockDim.x) q[i] = core::mul_rn(q[i], p.query_factor);
  __syncthreads();
}

// The contiguous head rows [first_row, first_row + rows).
template <int D>
__device__ void prepare_queries(const DecodeParams& p, std::int64_t first_row, int rows, float* q, float* scratch) {
  prepare_query_rows<D>(p, rows, [=](int k) { return first_row + k; }, q, scratch);
}

}  // namespace turboquant::cuda::detail
