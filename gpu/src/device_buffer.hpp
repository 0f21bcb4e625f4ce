// A minimal owning device allocation for the host-pointer convenience wrappers
// (the device entry points themselves never allocate).
#pragma once

#include <cstddef>
#include <utility>

#include "cuda_check.hpp"

namespace turboquant::cuda::detail {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  Status allocate(std::size_t bytes) {
    bytes_ = bytes;
    if (bytes == 0) return Status();
    TQ_CUDA_TRY(cudaMalloc(&ptr_, bytes));
    return Status();
  }
  // Allocates and copies `bytes` from host memory (nothing when src is null).
  Status upload(const void* src, std::size_t bytes, cudaStream_t stream) {
    if (Status s = allocate(bytes); !s.ok()) return s;
    if (src != nullptr && bytes != 0) TQ_CUDA_TRY(cudaMemcpyAsync(ptr_, src, bytes, cudaMemcpyHostToDevice, stream));
    return Status();
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace turboquant::cuda::detail
