// Instantiations of the fast decode for head_dim 128 (one file per head_dim so
// they compile in parallel).
#include "fast_launch.cuh"

namespace turboquant::cuda::detail {

cudaError_t launch_fast_decode_d128(const DecodeParams& p, cudaStream_t stream) {
  return launch_fast_for_bits<128>(p, stream);
}

}  // namespace turboquant::cuda::detail
