// Tensor Memory Accelerator copies (sm_90) and the shared-memory barriers
// that count their bytes: the PTX of FastTensorLoader (fast_loader.cuh).
// A barrier is initialized with one arrival; each use is one arrive that
// announces the bytes to expect, then the copies that deliver them; waiters
// test the parity of the use (0, 1, 0, ... per barrier). Builds for older
// architectures compile these to traps: the host takes tensor copies only on
// sm_90 and newer (device_has_tensor_copies).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "mma_utils.cuh"

namespace turboquant::cuda::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TQ_TENSOR_COPY_PTX(...) __trap()
#else
#define TQ_TENSOR_COPY_PTX(...) asm volatile(__VA_ARGS__)
#endif

__device__ __forceinline__ void barrier_init(std::uint64_t* bar, int arrivals) {
  TQ_TENSOR_COPY_PTX("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// Makes initialized barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void barrier_init_fence() {
  TQ_TENSOR_COPY_PTX("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  TQ_TENSOR_COPY_PTX("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void barrier_arrive_expect_bytes(std::uint64_t* bar, std::uint32_t bytes) {
  TQ_TENSOR_COPY_PTX("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void barrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done = 1;  // stays 1 where the PTX is a trap
  do {
    TQ_TENSOR_COPY_PTX(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// The box of `map` at element coordinates (x, y, z) into shared memory at dst
// (128-byte aligned); its bytes complete on `bar`.
__device__ __forceinline__ void tensor_copy_3d(void* dst, const CUtensorMap* map, int x, int y, int z,
                                               std::uint64_t* bar) {
  TQ_TENSOR_COPY_PTX(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
}

#undef TQ_TENSOR_COPY_PTX

}  // namespace turboquant::cuda::detail
