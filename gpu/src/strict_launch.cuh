// Launch of the strict-decode instances of one head_dim (included by the
// generated strict_kernels_d<D>.cu), dispatched over StrictBits and the heads
// per block.
#pragma once

#include "cuda_check.hpp"
#include "device_cache.hpp"
#include "launch.hpp"
#include "strict_decode.cuh"
#include "strict_split.cuh"

namespace turboquant::cuda::detail {

// Below this many warps in the one-warp-per-split grid (per SM), the splits are
// too few to fill the GPU and each split gets kSplitWarps warps instead.
inline constexpr int kStrictSplitWarpsPerSm = 4;

template <int D, int KB, int VB, int H>
cudaError_t launch_strict(const DecodeParams& p, cudaStream_t stream) {
  const long long split_warps =
      static_cast<long long>(p.plan_splits) * p.layout.num_kv_heads * p.chunks_per_kv_head * p.batch;
  if (split_warps < static_cast<long long>(kStrictSplitWarpsPerSm) * device_sm_count()) {
    constexpr int kSmem = sizeof(StrictSplitShared<D, KB, VB, H>);
    static PerDeviceInt attr_cache;
    const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, strict_split_kernel<D, KB, VB, H>, kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
    strict_split_kernel<D, KB, VB, H><<<grid, 32 * kSplitWarps<D>, kSmem, stream>>>(p);
    return cudaGetLastError();
  }
  constexpr int kSmem = sizeof(StrictShared<D, KB, VB, H>);
  static PerDeviceInt attr_cache;
  const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, strict_decode_kernel<D, KB, VB, H>, kSmem);
  if (attr != cudaSuccess) return attr;
  // One warp per split: kStrictWarps consecutive splits per block.
  const dim3 grid((p.plan_splits + kStrictWarps - 1) / kStrictWarps, p.layout.num_kv_heads * p.chunks_per_kv_head,
                  p.batch);
  strict_decode_kernel<D, KB, VB, H><<<grid, kStrictThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <int D, int KB, int VB>
cudaError_t launch_strict_h(const DecodeParams& p, cudaStream_t stream) {
  switch (p.heads_per_block) {
    case 1: return launch_strict<D, KB, VB, 1>(p, stream);
    case 2: return launch_strict<D, KB, VB, 2>(p, stream);
    case kStrictHeadsPerBlock: return launch_strict<D, KB, VB, kStrictHeadsPerBlock>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <int D>
Status launch_strict_decode_dim(const DecodeParams& p, cudaStream_t stream) {
  return launch_for_bits(StrictBits{}, p, "strict decode launch", [&](auto b) {
    return launch_strict_h<D, decltype(b)::kKey, decltype(b)::kValue>(p, stream);
  });
}

}  // namespace turboquant::cuda::detail
