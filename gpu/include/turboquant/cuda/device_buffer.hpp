// An owning device allocation for host-side helpers of the CUDA backend (the
// *_from_host wrappers, tools/tq): in the build tree only, not installed. The
// device entry points themselves never allocate. Needs cuda_runtime.h (unlike
// turboquant/cuda.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "turboquant/cuda/device_error.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  // `bytes` of device memory (none for 0: get() stays null).
  Status allocate(std::size_t bytes) {
    bytes_ = bytes;
    if (bytes == 0) return Status();
    if (const cudaError_t e = cudaMalloc(&ptr_, bytes); e != cudaSuccess) return device_error(e, "cudaMalloc");
    return Status();
  }
  // Allocates and copies `bytes` from host memory on `stream` (nothing to copy when src is null).
  Status upload(const void* src, std::size_t bytes, cudaStream_t stream = nullptr) {
    if (Status s = allocate(bytes); !s.ok()) return s;
    if (src == nullptr || bytes == 0) return Status();
    if (const cudaError_t e = cudaMemcpyAsync(ptr_, src, bytes, cudaMemcpyHostToDevice, stream); e != cudaSuccess) {
      return device_error(e, "cudaMemcpyAsync to device");
    }
    return Status();
  }
  // Copies all bytes() to host memory and waits for the copy.
  Status download(void* dst, cudaStream_t stream = nullptr) const {
    if (bytes_ == 0) return Status();
    if (const cudaError_t e = cudaMemcpyAsync(dst, ptr_, bytes_, cudaMemcpyDeviceToHost, stream); e != cudaSuccess) {
      return device_error(e, "cudaMemcpyAsync to host");
    }
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return device_error(e, "cudaStreamSynchronize");
    return Status();
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace turboquant::cuda::detail
