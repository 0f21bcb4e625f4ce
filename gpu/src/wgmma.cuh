// Warpgroup mma (sm_90a): D(64 x N) += A(64 x 16) * B(16 x N), fp16 operands,
// fp32 accumulators; A from registers, B from shared memory through a matrix
// descriptor, issued by the four warps of a warpgroup together.
//
// Registers, per warp w of the group (lane l, g = l / 4, c = l % 4), are those
// of mma_16816 for the warp's 16 rows 16 w .. 16 w + 15:
//   a[0] (row g, k 2c, 2c + 1), a[1] (row g + 8, ...), a[2] (row g, k 2c + 8, + 9),
//   a[3] (row g + 8, k 2c + 8, + 9);
//   d[n][0..1] (row g, cols 8 n + 2c, + 1), d[n][2..3] (row g + 8, ...), n < N / 8.
// B is "K-major" (each of B's N columns holds its 16 k contiguously) in core
// matrices of 8 columns x 8 k (8 rows of 16 bytes, 128 contiguous bytes),
// without swizzle; the descriptor gives the byte distance of core matrices
// adjacent in K (lbo) and in N (sbo).
//
// Compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); other targets keep mma_16816.
#pragma once

#include <cstdint>

#include "mma_utils.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TURBOQUANT_HAVE_WGMMA 1
#else
#define TURBOQUANT_HAVE_WGMMA 0
#endif

namespace turboquant::cuda::detail {

// Shared-memory matrix descriptor: start address, lbo, sbo (all >> 4), no swizzle.
__device__ __forceinline__ std::uint64_t wgmma_descriptor(const void* smem, std::uint32_t lbo, std::uint32_t sbo) {
  const std::uint64_t field = 0x3FFF;
  return (std::uint64_t{smem_addr(smem) >> 4} & field) | ((std::uint64_t{lbo >> 4} & field) << 16) |
         ((std::uint64_t{sbo >> 4} & field) << 32);
}

// The descriptor of the matrix `bytes` (a multiple of 16) further on: only the
// address field moves, and it cannot carry into lbo, as shared-memory addresses
// are below 2^18 bytes. One add per product instead of building each
// descriptor from its address (the wide kernel built 12 a step, about 4.5
// uniform instructions each).
__device__ __forceinline__ std::uint64_t wgmma_descriptor_advance(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}

#if TURBOQUANT_HAVE_WGMMA

// Orders this thread's register and shared-memory accesses before the next
// wgmma (registers of A and D written by ordinary instructions).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until every committed wgmma of this thread has finished (its D
// written, its shared memory read).
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Makes this thread's generic-proxy shared-memory stores visible to the async
// proxy, through which wgmma reads B (before the barrier that publishes them).
__device__ __forceinline__ void fence_shared_for_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accesses of an accumulator across the wait.
template <int N>
__device__ __forceinline__ void wgmma_pin(float (&d)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
    asm volatile("" : "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])::"memory");
  }
}

// D(64 x 64) = A * B + (accumulate ? D : 0).
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[8][4], const std::uint32_t (&a)[4], std::uint64_t b,
                                               bool accumulate) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, acc, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int{accumulate})
      : "memory");
}

// D(64 x 128) = A * B + (accumulate ? D : 0).
__device__ __forceinline__ void wgmma_64x128x16(float (&d)[16][4], const std::uint32_t (&a)[4], std::uint64_t b,
                                                bool accumulate) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, acc, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),
        "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int{accumulate})
      : "memory");
}

// D(64 x 64) = A * B + (accumulate ? D : 0), A from shared memory through its
// descriptor (K-major, as B).
__device__ __forceinline__ void wgmma_64x64x16_smem_a(float (&d)[8][4], std::uint64_t a, std::uint64_t b,
                                                      bool accumulate) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, acc, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "r"(int{accumulate})
      : "memory");
}

// D(64 x 8 N) = A * B (+ D) for the N of the wide kernel's tiles (64 and 128).
template <int N>
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[N][4], const std::uint32_t (&a)[4], std::uint64_t b,
                                              bool accumulate) {
  static_assert(N == 8 || N == 16, "wgmma_64xNx16: 64 or 128 columns");
  if constexpr (N == 8) {
    wgmma_64x64x16(d, a, b, accumulate);
  } else {
    wgmma_64x128x16(d, a, b, accumulate);
  }
}

#endif  // TURBOQUANT_HAVE_WGMMA

}  // namespace turboquant::cuda::detail
