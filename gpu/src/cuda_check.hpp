// CUDA errors -> Status: the one macro every CUDA runtime call goes through.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

inline Status device_error(cudaError_t err, const char* what) {
  return Status(StatusCode::kDeviceError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
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
