// Fast-decode dispatch over head_dim.
#include "launch.hpp"

namespace turboquant::cuda::detail {

bool fast_decode_supported(int head_dim, int key_bits, int value_bits) {
  const bool bits = (key_bits == 8 && value_bits == 4) || (key_bits == 4 && value_bits == 4) ||
                    (key_bits == 3 && value_bits == 4) || (key_bits == 3 && value_bits == 3);
  return bits && decode_head_dim_supported(head_dim);
}

int fast_decode_occupancy(int head_dim, int key_bits, int value_bits) {
  switch (head_dim) {
    case 64: return fast_decode_occupancy_d64(key_bits, value_bits);
    case 128: return fast_decode_occupancy_d128(key_bits, value_bits);
    case 256: return fast_decode_occupancy_d256(key_bits, value_bits);
    default: return 0;
  }
}

int device_sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      return 0;
    }
    return n;
  }();
  return sms;
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
