// Strict-decode instantiations for head_dim 64 (--fmad=false).
#include "strict_launch.cuh"

namespace turboquant::cuda::detail {

cudaError_t launch_strict_decode_d64(const DecodeParams& p, cudaStream_t stream) { return launch_strict_d<64>(p, stream); }

}  // namespace turboquant::cuda::detail
