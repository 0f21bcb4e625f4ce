// Launch of the fast-decode instances of one head_dim (included by the
// generated fast_kernels_d<D>.cu), dispatched over FastBits.
#pragma once

#include "cuda_check.hpp"
#include "device_cache.hpp"
#include "fast_decode.cuh"
#include "launch.hpp"

namespace turboquant::cuda::detail {

template <int D, int KB, int VB>
cudaError_t launch_fast(const DecodeParams& p, cudaStream_t stream) {
  using T = FastTraits<D, KB, VB>;
  static PerDeviceInt attr_cache;
  const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, fast_decode_kernel<D, KB, VB>, T::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
  fast_decode_kernel<D, KB, VB><<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// Resident blocks per SM of one instance on the current device (cached per device; 0 on error).
template <int D, int KB, int VB>
int fast_occupancy() {
  static PerDeviceInt attr_cache, blocks_cache;
  return blocks_cache.get([] {
    using T = FastTraits<D, KB, VB>;
    if (set_max_dynamic_smem_once(attr_cache, fast_decode_kernel<D, KB, VB>, T::kSmemBytes) != cudaSuccess) return 0;
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fast_decode_kernel<D, KB, VB>, T::kThreads,
                                                      T::kSmemBytes) != cudaSuccess) {
      return 0;
    }
    return n;
  });
}

template <int D>
Status launch_fast_decode_dim(const DecodeParams& p, cudaStream_t stream) {
  return launch_for_bits(FastBits{}, p, "fast decode launch", [&](auto b) {
    return launch_fast<D, decltype(b)::kKey, decltype(b)::kValue>(p, stream);
  });
}

template <int D>
int fast_decode_occupancy_dim(int key_bits, int value_bits) {
  int blocks = 0;
  (void)dispatch_bits(FastBits{}, key_bits, value_bits, "fast decode", [&](auto b) {
    blocks = fast_occupancy<D, decltype(b)::kKey, decltype(b)::kValue>();
    return Status();
  });
  return blocks;
}

}  // namespace turboquant::cuda::detail
