// Launch of the strict-decode instances of one head_dim and layout (included
// by the generated strict_kernels_d<D>.cu, strict_kernels_aos_d<D>.cu and
// strict_kernels_e4b15_d<D>.cu), dispatched over StrictBits, the FP8 flavour
// and the heads per block.
#pragma once

#include "cuda_check.hpp"
#include "decode_setup.hpp"
#include "device_cache.hpp"
#include "launch.hpp"
#include "strict_decode.cuh"
#include "strict_split.cuh"

namespace turboquant::cuda::detail {

// Below this many warps in the one-warp-per-split grid (per SM), the splits are
// too few to fill the GPU and each split gets kSplitWarps warps instead.
inline constexpr int kStrictSplitWarpsPerSm = 4;

template <int D, int KB, int VB, int H, class C>
cudaError_t launch_strict(const DecodeParams& p, cudaStream_t stream) {
  const long long split_warps =
      static_cast<long long>(p.plan_splits) * p.layout.num_kv_heads * p.chunks_per_kv_head * p.rows;
  if (split_warps < static_cast<long long>(kStrictSplitWarpsPerSm) * device_sm_count()) {
    constexpr int kSmem = sizeof(StrictSplitShared<D, KB, VB, H, C>);
    static PerDeviceInt attr_cache;
    const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, strict_split_kernel<D, KB, VB, H, C>, kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid(p.plan_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.rows);
    strict_split_kernel<D, KB, VB, H, C><<<grid, 32 * kSplitWarps<D>, kSmem, stream>>>(p);
    return cudaGetLastError();
  }
  constexpr int kSmem = sizeof(StrictShared<D, KB, VB, H, C>);
  static PerDeviceInt attr_cache;
  const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, strict_decode_kernel<D, KB, VB, H, C>, kSmem);
  if (attr != cudaSuccess) return attr;
  // One warp per split: kStrictWarps consecutive splits per block.
  const dim3 grid((p.plan_splits + kStrictWarps - 1) / kStrictWarps, p.layout.num_kv_heads * p.chunks_per_kv_head,
                  p.rows);
  strict_decode_kernel<D, KB, VB, H, C><<<grid, kStrictThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <int D, int KB, int VB, class C>
cudaError_t launch_strict_h(const DecodeParams& p, cudaStream_t stream) {
  switch (p.heads_per_block) {
    case 1: return launch_strict<D, KB, VB, 1, C>(p, stream);
    case 2: return launch_strict<D, KB, VB, 2, C>(p, stream);
    case kStrictHeadsPerBlock: return launch_strict<D, KB, VB, kStrictHeadsPerBlock, C>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

// The e4b15 instances (FP8 keys of vLLM below sm_89) of one head_dim, both
// layouts: defined and instantiated in the generated strict_kernels_e4b15_d<D>.cu
// so that they compile in parallel with the others.
template <int D, core::LayoutKind L, int VB>
cudaError_t launch_strict_e4b15(const DecodeParams& p, cudaStream_t stream);

// FP8 keys have an instance per flavour; Lloyd-Max keys ignore the flavour.
template <int D, core::LayoutKind L>
Status launch_strict_decode_layout(const DecodeParams& p, cudaStream_t stream) {
  return launch_for_bits(StrictBits{}, p, "strict decode launch", [&](auto b) {
    constexpr int KB = decltype(b)::kKey;
    constexpr int VB = decltype(b)::kValue;
    if constexpr (KB == core::kFp8KeyBits) {
      if (p.layout.format.fp8_format == core::Fp8Format::kE4b15) return launch_strict_e4b15<D, L, VB>(p, stream);
    }
    if constexpr (StrictRecord<D, KB, VB, CacheKind<L>>::kShiftedRows) {
      using Uniform = CacheKind<L, core::Fp8Format::kE4m3, true>;  // one row shift per warp
      if (strict_uniform_shift() && uniform_row_shift(p.cache, p.layout)) return launch_strict_h<D, KB, VB, Uniform>(p, stream);
    }
    return launch_strict_h<D, KB, VB, CacheKind<L>>(p, stream);
  });
}

}  // namespace turboquant::cuda::detail
