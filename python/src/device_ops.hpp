// The CUDA half of turboquant.encode / decode: the library's device entry
// points (turboquant/cuda.hpp) on the caller's stream and the arrays' device.
// Compiled only with CUDA (cuda_ops.cpp); without it every function reports
// that this build has no CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arrays.hpp"
#include "turboquant/cache_view.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/status.hpp"

namespace tqpy {

bool cuda_built();

// Enqueues the decode on `stream` (a cudaStream_t as an integer; 0 = the
// legacy default stream) with `device` current. An empty workspace is taken
// from the device's stream-ordered pool for this call (cudaMallocAsync /
// cudaFreeAsync: no host synchronization), which a stream being captured into
// a CUDA graph refuses: the caller must pass one then.
turboquant::Status cuda_decode(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args, bool fast,
                               int device, std::uintptr_t stream, turboquant::MutableBuffer workspace);

// Bytes of the workspace a decode of this shape needs.
std::size_t cuda_decode_workspace_bytes(int batch, int num_q_heads, int num_splits, int head_dim);

// Enqueues the encode on `stream` with `device` current.
turboquant::Status cuda_encode(const turboquant::CacheView& cache, const turboquant::EncodeArgs& args, int device,
                               std::uintptr_t stream);

// Enqueue the dequantize (list / block-table form) on `stream` with `device` current.
turboquant::Status cuda_dequantize(const turboquant::ConstCacheView& cache, const turboquant::DequantizeArgs& args,
                                   int device, std::uintptr_t stream);
turboquant::Status cuda_dequantize_sequences(const turboquant::ConstCacheView& cache,
                                             const turboquant::DequantizeSequencesArgs& args, int device,
                                             std::uintptr_t stream);

// Waits for everything queued on `device` (CPU: nothing to wait for).
turboquant::Status device_synchronize(const Device& device);

// The kernel a decode uses ("cuda:fast" or "cuda:strict").
const char* cuda_decode_kernel(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args, bool fast);

}  // namespace tqpy
