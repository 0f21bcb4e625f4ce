// CUDA errors as Status, for the backend and its in-tree users (tools/tq);
// in the build tree only, not installed. Needs cuda_runtime.h.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

// kDeviceError naming the failed step and CUDA's error.
inline Status device_error(cudaError_t err, const char* what) {
  return Status(StatusCode::kDeviceError,
                std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace turboquant::cuda::detail
