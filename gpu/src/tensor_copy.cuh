// Tensor Memory Accelerator copies (sm_90) and the shared-memory barriers
// that count their bytes: the PTX of FastTensorLoader (fast_loader.cuh).
// A barrier is initialized with one arrival; each use is one arrive that
// announces the bytes to expect, then the copies that deliver them; waiters
// test the parity of the use (0, 1, 0, ... per barrier).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "mma_utils.cuh"

namespace turboquant::cuda::detail {

__device__ __forceinline__ void barrier_init(std::uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// Makes initialized barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void barrier_arrive_expect_bytes(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void barrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  do {
    asm volatile(
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
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
}

}  // namespace turboquant::cuda::detail
