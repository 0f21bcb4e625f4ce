// Strict-decode instantiations for head_dim 128 (--fmad=false).
#include "strict_launch.cuh"

namespace turboquant::cuda::detail {

cudaError_t launch_strict_decode_d128(const DecodeParams& p, cudaStream_t stream) { return launch_strict_d<128>(p, stream); }

}  // namespace turboquant::cuda::detail
