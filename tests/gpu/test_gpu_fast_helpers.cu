// Device-side unit test of the fast decode's e4b15 widening (mma_utils.cuh):
// every pair of bytes, in both byte positions of a word, against
// core::fp8_e4b15_to_fp16_bits on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mma_utils.cuh"
#include "turboquant/core/fp8.hpp"

namespace turboquant::cuda::detail {
namespace {

// Word i holds the byte pair (i & 0xff, i >> 8) in bytes 0, 1 and, swapped
// with junk, in bytes 2, 3; out[2i] / out[2i + 1] are the two widenings.
__global__ void widen_e4b15(std::uint32_t* out) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  const std::uint32_t word = i | (i << 16);
  out[2 * i] = e4b15x2_to_half2(word, kLowBytes);
  out[2 * i + 1] = e4b15x2_to_half2(word, kHighBytes);
}

TEST(GpuFastHelpers, E4b15WideningMatchesCoreForEveryBytePair) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  std::uint32_t* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 2 * 65536 * 4), cudaSuccess);
  widen_e4b15<<<256, 256>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<std::uint32_t> h(2 * 65536);
  ASSERT_EQ(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  int bad = 0;
  for (std::uint32_t i = 0; i < 65536 && bad < 5; ++i) {
    const std::uint32_t want = core::fp8_e4b15_to_fp16_bits(static_cast<std::uint8_t>(i)) |
                               std::uint32_t{core::fp8_e4b15_to_fp16_bits(static_cast<std::uint8_t>(i >> 8))} << 16;
    for (int k = 0; k < 2; ++k) {
      if (h[2 * i + k] != want) {
        ADD_FAILURE() << "bytes " << std::hex << i << " selector " << k << ": " << h[2 * i + k] << " != " << want;
        ++bad;
      }
    }
  }
}

}  // namespace
}  // namespace turboquant::cuda::detail
