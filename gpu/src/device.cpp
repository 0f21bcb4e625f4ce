// Device discovery.
#include <string>

#include "cuda_check.hpp"
#include "turboquant/cuda.hpp"

namespace turboquant::cuda {

Status device_status() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state
    return Status(StatusCode::kBackendUnavailable,
                  std::string("no CUDA device: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
  if (count == 0) return Status(StatusCode::kBackendUnavailable, "no CUDA device: cudaGetDeviceCount returned 0");
  return Status();
}

std::string device_description() {
  if (Status s = device_status(); !s.ok()) return s.message();
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    return "CUDA device (properties unavailable)";
  }
  int driver = 0;
  cudaDriverGetVersion(&driver);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs, " + std::to_string(prop.totalGlobalMem >> 20) +
         " MiB, L2 " + std::to_string(prop.l2CacheSize >> 10) + " KiB, driver API " + std::to_string(driver) +
         ", runtime " + std::to_string(runtime) + ")";
}

const char* mode_name(CudaMode mode) { return mode == CudaMode::kStrict ? "strict" : "fast"; }

}  // namespace turboquant::cuda
