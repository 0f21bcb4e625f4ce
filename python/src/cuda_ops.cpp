#include <cuda_runtime.h>

#include <string>

#include "device_ops.hpp"
#include "turboquant/cuda.hpp"

namespace tqpy {
namespace {

using turboquant::Status;
using turboquant::StatusCode;
namespace cuda = turboquant::cuda;

Status device_error(const char* what, cudaError_t e) {
  return Status(StatusCode::kDeviceError, std::string(what) + ": " + cudaGetErrorString(e));
}

// Makes `device` current for one call and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

cudaStream_t as_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

// f() with `device` current (the caller's device restored after).
template <class F>
Status on_device(int device, F&& f) {
  DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) return device_error("cudaSetDevice", guard.status());
  return f();
}

}  // namespace

bool cuda_built() { return true; }

std::size_t cuda_decode_workspace_bytes(int batch, int num_q_heads, int num_splits, int head_dim) {
  return cuda::decode_workspace_bytes(batch, num_q_heads, num_splits, head_dim);
}

const char* cuda_decode_kernel(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args, bool fast) {
  return cuda::decode_kernel_name(cache, args, fast ? cuda::CudaMode::kFast : cuda::CudaMode::kStrict);
}

Status cuda_decode(const turboquant::ConstCacheView& cache, const turboquant::DecodeArgs& args, bool fast, int device,
                   std::uintptr_t stream, turboquant::MutableBuffer workspace) {
  DeviceGuard guard(device);
  if (guard.status() != cudaSuccess) return device_error("cudaSetDevice", guard.status());
  const cuda::CudaMode mode = fast ? cuda::CudaMode::kFast : cuda::CudaMode::kStrict;
  if (workspace.data != nullptr) return cuda::decode(cache, args, mode, workspace, as_stream(stream));

  // Checked before anything is allocated, so bad arguments cost nothing.
  if (Status s = cuda::decode_can_implement(cache, args, mode); !s.ok()) return s;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(as_stream(stream), &capture); e != cudaSuccess) {
    return device_error("cudaStreamIsCapturing", e);
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return Status(StatusCode::kInvalidArgument,
                  "workspace = None while the stream is being captured into a CUDA graph: pass workspace= (a uint8 "
                  "device array of at least turboquant.decode_workspace_bytes(...) bytes, allocated before the "
                  "capture)");
  }
  const std::size_t bytes = cuda::decode_workspace_bytes(args.batch, args.num_q_heads, args.num_splits,
                                                         cache.layout.format.head_dim);
  void* scratch = nullptr;
  if (cudaError_t e = cudaMallocAsync(&scratch, bytes, as_stream(stream)); e != cudaSuccess) {
    return device_error("cudaMallocAsync of the decode workspace", e);
  }
  Status s = cuda::decode(cache, args, mode, turboquant::MutableBuffer{scratch, bytes}, as_stream(stream));
  if (cudaError_t e = cudaFreeAsync(scratch, as_stream(stream)); e != cudaSuccess && s.ok()) {
    s = device_error("cudaFreeAsync of the decode workspace", e);
  }
  return s;
}

Status cuda_dequantize(const turboquant::ConstCacheView& cache, const turboquant::DequantizeArgs& args, int device,
                       std::uintptr_t stream) {
  return on_device(device, [&] { return cuda::dequantize(cache, args, as_stream(stream)); });
}

Status cuda_dequantize_sequences(const turboquant::ConstCacheView& cache,
                                 const turboquant::DequantizeSequencesArgs& args, int device, std::uintptr_t stream) {
  return on_device(device, [&] { return cuda::dequantize_sequences(cache, args, as_stream(stream)); });
}

Status device_synchronize(const Device& device) {
  if (!device.cuda) return Status();
  return on_device(device.id, [] {
    const cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? Status() : device_error("cudaDeviceSynchronize", e);
  });
}

Status cuda_encode(const turboquant::CacheView& cache, const turboquant::EncodeArgs& args, int device,
                   std::uintptr_t stream) {
  return on_device(device, [&] { return cuda::encode(cache, args, as_stream(stream)); });
}

}  // namespace tqpy
