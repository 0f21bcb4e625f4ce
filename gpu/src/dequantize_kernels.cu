// The dequantize launcher: the launch-time numbers of DequantizeParams, then
// the head_dim's instances (dequantize_launch.cuh, one generated file per
// head_dim).
#include <cstdint>

#include "dequantize_params.hpp"
#include "dispatch.hpp"

namespace turboquant::cuda::detail {

cudaError_t launch_dequantize(const DequantizeParams& params, cudaStream_t stream) {
  DequantizeParams p = params;
  p.work = p.num_items * p.layout.num_kv_heads;
  // No record, or no cache block to read (then every sequence is empty: the
  // validation refuses a block-table entry past the cache).
  if (p.work == 0 || p.num_blocks == 0) return cudaSuccess;
  constexpr std::int64_t kNarrow = std::int64_t{INT32_MAX};  // FastDivisor is exact below 2^31
  p.narrow_indices = p.work <= kNarrow && p.num_blocks * p.layout.block_size <= kNarrow;
  p.heads_div = FastDivisor(static_cast<std::uint32_t>(p.layout.num_kv_heads));
  p.block_size_div = FastDivisor(static_cast<std::uint32_t>(p.layout.block_size));
  if (p.slots == nullptr) p.max_seq_div = FastDivisor(static_cast<std::uint32_t>(p.max_seq));  // >= 1: work > 0
  cudaError_t err = cudaErrorInvalidValue;  // a head_dim without an instance (refused by can_implement)
  (void)dispatch_head_dim(HeadDims{}, p.layout.format.head_dim, "dequantize", [&](auto d) {
    err = launch_dequantize_dim<decltype(d)::value>(p, stream);
    return Status();
  });
  return err;
}

}  // namespace turboquant::cuda::detail
