// Launch of one fast-decode instantiation, and the (key bits, value bits)
// dispatch for a head_dim.
#pragma once

#include "fast_decode.cuh"
#include "launch.hpp"

namespace turboquant::cuda::detail {

template <int D, int KB, int VB>
cudaError_t launch_fast(const DecodeParams& p, cudaStream_t stream) {
  using T = FastTraits<D, KB, VB>;
  static const cudaError_t attr = cudaFuncSetAttribute(fast_decode_kernel<D, KB, VB>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
  fast_decode_kernel<D, KB, VB><<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// Resident blocks per SM of one instantiation (cached; 0 on error).
template <int D, int KB, int VB>
int fast_occupancy() {
  static const int blocks = [] {
    using T = FastTraits<D, KB, VB>;
    if (cudaFuncSetAttribute(fast_decode_kernel<D, KB, VB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             T::kSmemBytes) != cudaSuccess) {
      return 0;
    }
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fast_decode_kernel<D, KB, VB>, T::kThreads,
                                                      T::kSmemBytes) != cudaSuccess) {
      return 0;
    }
    return n;
  }();
  return blocks;
}

template <int D>
int fast_occupancy_for_bits(int kb, int vb) {
  if (kb == 8 && vb == 4) return fast_occupancy<D, 8, 4>();
  if (kb == 4 && vb == 4) return fast_occupancy<D, 4, 4>();
  if (kb == 3 && vb == 4) return fast_occupancy<D, 3, 4>();
  if (kb == 3 && vb == 3) return fast_occupancy<D, 3, 3>();
  return 0;
}

template <int D>
cudaError_t launch_fast_for_bits(const DecodeParams& p, cudaStream_t stream) {
  const int kb = p.layout.format.key_bits;
  const int vb = p.layout.format.value_bits;
  if (kb == 8 && vb == 4) return launch_fast<D, 8, 4>(p, stream);
  if (kb == 4 && vb == 4) return launch_fast<D, 4, 4>(p, stream);
  if (kb == 3 && vb == 4) return launch_fast<D, 3, 4>(p, stream);
  if (kb == 3 && vb == 3) return launch_fast<D, 3, 3>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace turboquant::cuda::detail
