// CUDA errors -> Status: the one macro every CUDA runtime call goes through.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "turboquant/cuda/device_error.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

// Every non-null pointer must be memory the device can access (device,
// managed, or mapped host memory): a plain host pointer would fault inside a
// kernel, asynchronously and fatally for the context. A host-side query that
// needs no synchronization (allowed during stream capture).
inline Status check_device_pointers(std::initializer_list<std::pair<const char*, const void*>> args) {
  for (const auto& [name, ptr] : args) {
    if (ptr == nullptr) continue;
    cudaPointerAttributes attr{};
    const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky; do not leave it for the next call
      return device_error(err, name);
    }
    if (attr.type == cudaMemoryTypeUnregistered || attr.devicePointer == nullptr) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", ptr);
      return Status(StatusCode::kInvalidArgument,
                    std::string(name) + " = " + addr + " is host memory the device cannot access (pass a device pointer, or use the *_from_host entry points)");
    }
  }
  return Status();
}

}  // namespace turboquant::cuda::detail

// Evaluates a CUDA runtime call; on failure returns kDeviceError naming the call.
#define TQ_CUDA_TRY(call)                                                              \
  do {                                                                                 \
    const cudaError_t tq_cuda_err_ = (call);                                           \
    if (tq_cuda_err_ != cudaSuccess) return ::turboquant::cuda::detail::device_error(tq_cuda_err_, #call); \
  } while (0)

// After a kernel launch: the launch-configuration error, if any.
#define TQ_CUDA_TRY_LAUNCH(what) TQ_CUDA_TRY((static_cast<void>(what), cudaGetLastError()))
