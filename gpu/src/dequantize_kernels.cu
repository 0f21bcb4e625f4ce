// Instances and launcher of the dequantize kernel (--fmad=false): one per
// head_dim, output dtype and output alignment.
#include <algorithm>
#include <cstdint>

#include "dequantize.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace turboquant::cuda::detail {
namespace {

template <int D, DType kOut, bool kVector>
cudaError_t launch_instance(const DequantizeParams& p, cudaStream_t stream) {
  constexpr int kGroups = kDequantizeThreads / RecordGroup<D>::kLanes;
  const std::int64_t work = p.num_items * p.layout.num_kv_heads;
  // A grid-stride loop over at most one wave of resident blocks.
  const std::int64_t wave = std::int64_t{std::max(device_sm_count(), 1)} * kDequantizeBlocksPerSm;
  const std::int64_t blocks = std::min((work + kGroups - 1) / kGroups, wave);
  const std::size_t smem = p.rotation != nullptr ? std::size_t{kGroups} * 2 * D * sizeof(float) : 0;
  dequantize_kernel<D, kOut, kVector><<<static_cast<unsigned>(blocks), kDequantizeThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

// Vector stores when both outputs are aligned to a lane's run (always for
// fresh allocations).
template <int D, DType kOut>
cudaError_t launch_aligned(const DequantizeParams& p, cudaStream_t stream) {
  constexpr std::uintptr_t kAlign = std::min<std::uintptr_t>(RecordGroup<D>::kRun * (kOut == DType::kFloat32 ? 4 : 2), 16);
  const bool aligned = (reinterpret_cast<std::uintptr_t>(p.keys) | reinterpret_cast<std::uintptr_t>(p.values)) % kAlign == 0;
  return aligned ? launch_instance<D, kOut, true>(p, stream) : launch_instance<D, kOut, false>(p, stream);
}

template <int D>
cudaError_t launch_d(const DequantizeParams& p, cudaStream_t stream) {
  switch (p.out_dtype) {
    case DType::kFloat32:
      return launch_aligned<D, DType::kFloat32>(p, stream);
    case DType::kFloat16:
      return launch_aligned<D, DType::kFloat16>(p, stream);
    case DType::kBFloat16:
      return launch_aligned<D, DType::kBFloat16>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_dequantize(const DequantizeParams& params, cudaStream_t stream) {
  DequantizeParams p = params;
  const std::int64_t work = p.num_items * p.layout.num_kv_heads;
  if (work == 0) return cudaSuccess;
  constexpr std::int64_t kNarrow = std::int64_t{UINT32_MAX} / 2;  // headroom for w + stride
  p.narrow_indices = work <= kNarrow && p.num_blocks * p.layout.block_size <= kNarrow;
  cudaError_t err = cudaErrorInvalidValue;  // a head_dim without an instance (refused by can_implement)
  (void)dispatch_head_dim(HeadDims{}, p.layout.format.head_dim, "dequantize", [&](auto d) {
    err = launch_d<decltype(d)::value>(p, stream);
    return Status();
  });
  return err;
}

}  // namespace turboquant::cuda::detail
