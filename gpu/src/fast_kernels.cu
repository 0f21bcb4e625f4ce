// Fast-decode dispatch over head_dim.
#include "launch.hpp"

namespace turboquant::cuda::detail {

bool fast_decode_supported(int head_dim, int key_bits, int value_bits) {
  const bool bits = (key_bits == 8 && value_bits == 4) || (key_bits == 4 && value_bits == 4) ||
                    (key_bits == 3 && value_bits == 4) || (key_bits == 3 && value_bits == 3);
  return bits && decode_head_dim_supported(head_dim);
}

cudaError_t launch_fast_decode(const DecodeParams& p, cudaStream_t stream) {
  switch (p.layout.format.head_dim) {
    case 64: return launch_fast_decode_d64(p, stream);
    case 128: return launch_fast_decode_d128(p, stream);
    case 256: return launch_fast_decode_d256(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace turboquant::cuda::detail
