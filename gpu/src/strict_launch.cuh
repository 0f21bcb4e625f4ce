// Launch of one strict-decode instantiation and the bit dispatch for a head_dim.
#pragma once

#include "launch.hpp"
#include "strict_decode.cuh"

namespace turboquant::cuda::detail {

template <int D, int KB, int VB>
cudaError_t launch_strict(const DecodeParams& p, cudaStream_t stream) {
  constexpr int kSmem = sizeof(StrictShared<D, KB, VB>);
  static const cudaError_t attr =
      cudaFuncSetAttribute(strict_decode_kernel<D, KB, VB>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
  strict_decode_kernel<D, KB, VB><<<grid, kStrictThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_strict_d(const DecodeParams& p, cudaStream_t stream) {
  const int kb = p.layout.format.key_bits;
  const int vb = p.layout.format.value_bits;
  if (kb == 8) return vb == 4 ? launch_strict<D, 8, 4>(p, stream) : launch_strict<D, 8, 3>(p, stream);
  if (kb == 4) return vb == 4 ? launch_strict<D, 4, 4>(p, stream) : launch_strict<D, 4, 3>(p, stream);
  if (kb == 3) return vb == 4 ? launch_strict<D, 3, 4>(p, stream) : launch_strict<D, 3, 3>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace turboquant::cuda::detail
