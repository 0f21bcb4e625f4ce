// Host-side launchers of the kernels. The per-head_dim ones are templates
// whose definitions live in strict_launch.cuh / fast_launch.cuh and whose
// instances are the generated files (one per TURBOQUANT_CUDA_HEAD_DIMS entry,
// so they compile in parallel); launch_decode() dispatches to them
// (dispatch.hpp). Arguments were checked by the *_can_implement functions.
#pragma once

#include <cuda_runtime.h>

#include "dispatch.hpp"
#include "params.hpp"
#include "tensor_maps.hpp"
#include "turboquant/cuda/device_error.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

// Strict decode for one head_dim and layout (grid: splits x (Hk * chunks) x
// batch); the layouts' instances are in separate generated files.
template <int D, core::LayoutKind L>
Status launch_strict_decode_layout(const DecodeParams& p, cudaStream_t stream);
template <int D>
Status launch_strict_decode_dim(const DecodeParams& p, cudaStream_t stream) {
  return dispatch_layout(p.layout.format.layout,
                         [&](auto l) { return launch_strict_decode_layout<D, decltype(l)::value>(p, stream); });
}
// Fast decode for one head_dim, both layouts and the FastBits pairs
// (kTensorCopy: the instances of p.tensor_copy; the two sets are
// separate generated files).
template <int D, bool kTensorCopy>
Status launch_fast_decode_dim(const DecodeParams& p, const FastTensorMaps& maps, cudaStream_t stream);
// Resident fast-decode blocks per SM of the format's instance on the current
// device (0 if unknown or not instantiated).
template <int D, bool kTensorCopy>
int fast_decode_occupancy_dim(const core::Format& f, int column_tiles, int warps, int cluster);

// dispatch_bits over p's bits for a launcher returning the launch's
// cudaError_t (kDeviceError "<what>: ..." when it fails).
template <class List, class F>
Status launch_for_bits(List bits, const DecodeParams& p, const char* what, F&& launch) {
  return dispatch_bits(bits, p.layout.format.key_bits, p.layout.format.value_bits, what, [&](auto b) {
    const cudaError_t err = launch(b);
    return err == cudaSuccess ? Status() : device_error(err, what);
  });
}

// The decode kernel (fast or strict) for p's head_dim and bits; kUnsupported
// for an instance the build lacks, kDeviceError for a launch error.
// maps: the tensor maps of p.tensor_copy (tensor_maps.hpp).
Status launch_decode(const DecodeParams& p, bool fast, const FastTensorMaps& maps, cudaStream_t stream);
// The merge of the per-split partials (after either decode kernel).
cudaError_t launch_merge(const DecodeParams& p, bool tile_aligned, cudaStream_t stream);

// The fast kernel has an instance for this head_dim and these bits.
inline bool fast_decode_supported(int head_dim, int key_bits, int value_bits) {
  return contains(HeadDims{}, head_dim) && contains(FastBits{}, key_bits, value_bits);
}
// Resident fast-decode blocks per SM for this format on the current device (0
// if unknown); tensor_copy: of the tensor-copy instance.
int fast_decode_occupancy(const core::Format& f, bool tensor_copy, int column_tiles = 1, int warps = 0);
// Resident fast-decode blocks on the whole device when launched in clusters
// of `cluster` blocks (cluster_pace.cuh; 0 if unknown or unsupported).
int fast_decode_cluster_residency(const core::Format& f, bool tensor_copy, int column_tiles, int warps, int cluster);
// Whether the current device has the Tensor Memory Accelerator (sm_90 and newer).
bool device_has_tensor_copies();
// Multiprocessors of the current device (cached per device; 0 on error).
int device_sm_count();
// Peak DRAM bandwidth of the current device per multiprocessor, in MB/s
// (2 x memory clock x bus width / SMs; cached per device; 0 on error).
int device_dram_mbps_per_sm();

cudaError_t launch_encode(const EncodeParams& p, cudaStream_t stream);

}  // namespace turboquant::cuda::detail
