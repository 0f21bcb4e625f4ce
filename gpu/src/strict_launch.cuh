// Launch of one strict-decode instantiation and the bit / heads dispatch for a head_dim.
#pragma once

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
    static const cudaError_t attr = cudaFuncSetAttribute(strict_split_kernel<D, KB, VB, H>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
    strict_split_kernel<D, KB, VB, H><<<grid, 32 * kSplitWarps<D>, kSmem, stream>>>(p);
    return cudaGetLastError();
  }
  constexpr int kSmem = sizeof(StrictShared<D, KB, VB, H>);
  static const cudaError_t attr =
      cudaFuncSetAttribute(strict_decode_kernel<D, KB, VB, H>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
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
cudaError_t launch_strict_d(const DecodeParams& p, cudaStream_t stream) {
  const int kb = p.layout.format.key_bits;
  const int vb = p.layout.format.value_bits;
  if (kb == 8) return vb == 4 ? launch_strict_h<D, 8, 4>(p, stream) : launch_strict_h<D, 8, 3>(p, stream);
  if (kb == 4) return vb == 4 ? launch_strict_h<D, 4, 4>(p, stream) : launch_strict_h<D, 4, 3>(p, stream);
  if (kb == 3) return vb == 4 ? launch_strict_h<D, 3, 4>(p, stream) : launch_strict_h<D, 3, 3>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace turboquant::cuda::detail
