// The backends' factories, one per file of this directory; registry.cpp lists
// them. Private to turboquant::backends.
#pragma once

#include <string_view>

#include "turboquant/backend.hpp"

namespace turboquant::registry {

// reference_backend.cpp: "cpu-ref".
const Backend& reference_backend();
// cpu_isa_backend.cpp: "cpu:<isa>" for "scalar", "avx2", "avx512".
const Backend& cpu_isa_backend(std::string_view isa);
// cuda_backend.cpp (CUDA builds), else unbuilt_backend.cpp: "cuda:strict",
// "cuda:fast".
const Backend& cuda_backend(bool fast);

// What both files say about the two CUDA backends, indexed by `fast`.
struct CudaBackendInfo {
  const char* name;
  const char* description;
  bool exact_decode;
};
inline constexpr CudaBackendInfo kCudaBackends[2] = {
    {"cuda:strict", "CUDA, fp32 CUDA-core kernels: the golden model's bits (decode, encode and dequantize)",
     true},
    {"cuda:fast",
     "CUDA, tensor-core decode (relative L2 <= 1e-3 vs the golden model, a split plan of its own) and the exact "
     "encode and dequantize",
     false},
};

}  // namespace turboquant::registry
