// Host-side launchers of the kernels (one translation unit per kernel family,
// so that the template instantiations compile in parallel). Each returns the
// launch error; arguments were checked by the *_can_implement functions.
#pragma once

#include <cuda_runtime.h>

#include "params.hpp"

namespace turboquant::cuda::detail {

inline bool decode_head_dim_supported(int d) { return d == 64 || d == 128 || d == 256; }

// Strict decode (grid: splits x (Hk * chunks) x batch) and the merge.
cudaError_t launch_strict_decode(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_strict_decode_d64(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_strict_decode_d128(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_strict_decode_d256(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_merge(const DecodeParams& p, bool tile_aligned, cudaStream_t stream);

// Fast decode for the preset bit combinations (K8V4, K4V4, K3V4, K3V3).
bool fast_decode_supported(int head_dim, int key_bits, int value_bits);
cudaError_t launch_fast_decode(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_fast_decode_d64(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_fast_decode_d128(const DecodeParams& p, cudaStream_t stream);
cudaError_t launch_fast_decode_d256(const DecodeParams& p, cudaStream_t stream);
// Resident fast-decode blocks per SM for this format (0 if unknown).
int fast_decode_occupancy(int head_dim, int key_bits, int value_bits);
int fast_decode_occupancy_d64(int key_bits, int value_bits);
int fast_decode_occupancy_d128(int key_bits, int value_bits);
int fast_decode_occupancy_d256(int key_bits, int value_bits);
// Multiprocessors of the current device (cached).
int device_sm_count();

cudaError_t launch_encode(const EncodeParams& p, cudaStream_t stream);

}  // namespace turboquant::cuda::detail
