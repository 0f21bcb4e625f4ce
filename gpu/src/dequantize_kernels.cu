// Instances and launcher of the dequantize kernel (--fmad=false).
#include <algorithm>

#include "dequantize.cuh"
#include "dispatch.hpp"
#include "launch.hpp"

namespace turboquant::cuda::detail {

cudaError_t launch_dequantize(const DequantizeParams& p, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const std::int64_t work = p.num_items * p.layout.num_kv_heads;
  if (work == 0) return cudaSuccess;
  // A grid-stride loop over at most a few waves of blocks.
  const std::int64_t wave = std::int64_t{std::max(device_sm_count(), 1)} * 16;
  const std::int64_t blocks = std::min((work + kThreads - 1) / kThreads, wave);
  cudaError_t err = cudaErrorInvalidValue;  // a head_dim without an instance (refused by can_implement)
  (void)dispatch_head_dim(HeadDims{}, p.layout.format.head_dim, "dequantize", [&](auto d) {
    dequantize_kernel<decltype(d)::value><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
    err = cudaGetLastError();
    return Status();
  });
  return err;
}

}  // namespace turboquant::cuda::detail
