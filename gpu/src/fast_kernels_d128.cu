// Instantiations of the fast decode for head_dim 128 (one file per head_dim so
// they compile in parallel).
#include "fast_launch.cuh"

namespace turboquant::cuda::detail {

cudaError_t launch_fast_decode_d128(const DecodeParams& p, cudaStream_t stream) {
  return launch_fast_for_bits<128>(p, stream);
}

int fast_decode_occupancy_d128(int key_bits, int value_bits) { return fast_occupancy_for_bits<128>(key_bits, value_bits); }

}  // namespace turboquant::cuda::detail
