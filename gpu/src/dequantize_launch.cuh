// The dequantize kernels' launch for one head_dim (instantiated per head_dim
// by the generated dequantize_kernels_d*.cu; launch_dequantize in
// dequantize_kernels.cu dispatches to them).
#pragma once

#include <algorithm>
#include <cstdint>

#include "dequantize.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace turboquant::cuda::detail {

template <int D, core::LayoutKind kLayout, DType kOut, int KB, int VB>
cudaError_t launch_dequantize_instance(const DequantizeParams& p, cudaStream_t stream) {
  constexpr int kGroups = kDequantizeThreads / RecordGroup<D>::kLanes;
  // A grid-stride loop over at most one wave of resident blocks.
  const std::int64_t wave = std::int64_t{std::max(device_sm_count(), 1)} * kDequantizeBlocksPerSm<D>;
  const std::int64_t blocks = std::min((p.work + kGroups - 1) / kGroups, wave);
  const std::size_t smem = p.rotation != nullptr ? std::size_t{kGroups} * 2 * D * sizeof(float) : 0;
  dequantize_kernel<D, kLayout, kOut, KB, VB><<<static_cast<unsigned>(blocks), kDequantizeThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

// Every bit-width pair of the formats (StrictBits): the dequantize serves
// all of them.
template <int D, core::LayoutKind kLayout, DType kOut>
cudaError_t launch_dequantize_bits(const DequantizeParams& p, cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)dispatch_bits(StrictBits{}, p.layout.format.key_bits, p.layout.format.value_bits, "dequantize", [&](auto b) {
    using B = decltype(b);
    err = launch_dequantize_instance<D, kLayout, kOut, B::kKey, B::kValue>(p, stream);
    return Status();
  });
  return err;
}

template <int D, core::LayoutKind kLayout>
cudaError_t launch_dequantize_layout(const DequantizeParams& p, cudaStream_t stream) {
  switch (p.out_dtype) {
    case DType::kFloat32:
      return launch_dequantize_bits<D, kLayout, DType::kFloat32>(p, stream);
    case DType::kFloat16:
      return launch_dequantize_bits<D, kLayout, DType::kFloat16>(p, stream);
    case DType::kBFloat16:
      return launch_dequantize_bits<D, kLayout, DType::kBFloat16>(p, stream);
  }
  return cudaErrorInvalidValue;
}

template <int D>
cudaError_t launch_dequantize_dim(const DequantizeParams& p, cudaStream_t stream) {
  return p.layout.format.aos() ? launch_dequantize_layout<D, core::LayoutKind::kAoS>(p, stream)
                               : launch_dequantize_layout<D, core::LayoutKind::kSoA>(p, stream);
}

}  // namespace turboquant::cuda::detail
