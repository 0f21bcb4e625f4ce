// Stores of a few words to an address of any alignment, as wide as the
// alignment allows: the encode's code bytes (AoS slots are only 2-byte
// aligned) and the dequantize's output rows (a caller's pointer of any
// element alignment) go through the same function.
#pragma once

#include <cstdint>

namespace turboquant::cuda::detail {

// kBytes bytes (a multiple of 4) from words w to dst, in the widest stores
// that `known` allows: every power of two dividing `known` divides dst's
// address (the address itself, or an alignment the caller knows). The 8-byte
// form only for 8-byte pieces (wider pieces take 16-byte stores or words).
template <int kBytes>
__device__ __forceinline__ void store_bytes(std::uint8_t* dst, const std::uint32_t (&w)[kBytes / 4],
                                            std::uintptr_t known) {
  static_assert(kBytes % 4 == 0, "whole words");
  if (kBytes % 16 == 0 && known % 16 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) {
      reinterpret_cast<uint4*>(dst)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    }
    return;
  }
  if constexpr (kBytes == 8) {
    if (known % 8 == 0) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      return;
    }
  }
  if (known % 4 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) reinterpret_cast<std::uint32_t*>(dst)[k] = w[k];
  } else if (known % 2 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 2; ++k) {
      reinterpret_cast<std::uint16_t*>(dst)[k] = static_cast<std::uint16_t>(w[k / 2] >> (16 * (k % 2)));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kBytes; ++k) dst[k] = static_cast<std::uint8_t>(w[k / 4] >> (8 * (k % 4)));
  }
}

// The address of p as store_bytes' `known`.
__device__ __forceinline__ std::uintptr_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace turboquant::cuda::detail
