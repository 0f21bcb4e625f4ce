// Stores of a few words to an address of any alignment, as wide as the
// alignment allows: the encode's code bytes (AoS slots are only 2-byte
// aligned) and the dequantize's output rows (a caller's pointer of any
// element alignment) go through the same function.
#pragma once

#include <cstdint>

namespace turboquant::cuda::detail {

// The largest power of two dividing the address (0 for null).
__device__ __forceinline__ unsigned alignment_of(const void* p) {
  const auto a = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) & 0xffffu);
  return a == 0 ? 0x10000u : a & (~a + 1u);
}

// kBytes bytes (a multiple of 4) from words w to dst, in the widest stores
// that `align` allows: a power of two that divides dst's address (the
// caller's knowledge, or alignment_of(dst)).
template <int kBytes>
__device__ __forceinline__ void store_bytes(std::uint8_t* dst, const std::uint32_t (&w)[kBytes / 4], unsigned align) {
  static_assert(kBytes % 4 == 0, "whole words");
  if (kBytes % 16 == 0 && align >= 16) {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) {
      reinterpret_cast<uint4*>(dst)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    }
  } else if (kBytes % 8 == 0 && align >= 8) {
#pragma unroll
    for (int k = 0; k < kBytes / 8; ++k) reinterpret_cast<uint2*>(dst)[k] = make_uint2(w[2 * k], w[2 * k + 1]);
  } else if (align >= 4) {
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) reinterpret_cast<std::uint32_t*>(dst)[k] = w[k];
  } else if (align >= 2) {
#pragma unroll
    for (int k = 0; k < kBytes / 2; ++k) {
      reinterpret_cast<std::uint16_t*>(dst)[k] = static_cast<std::uint16_t>(w[k / 2] >> (16 * (k % 2)));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kBytes; ++k) dst[k] = static_cast<std::uint8_t>(w[k / 4] >> (8 * (k % 4)));
  }
}

}  // namespace turboquant::cuda::detail
