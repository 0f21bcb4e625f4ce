// Dequantization of the fast decode, in registers, straight into the A
// fragments of mma_16816 (the lane layouts are in fast_decode.cuh's header).
#pragma once

#include <cstdint>

#include "fast_traits.cuh"
#include "mma_utils.cuh"
#include "turboquant/core/format.hpp"

namespace turboquant::cuda::detail {

// Key fragment for k-step ks: dims 4ks, 4ks+1 (r0) and 4ks+2, 4ks+3 (r1) of the
// lane's key chunk, one token (a row of the A operand of S^T).
// Lloyd-Max codes: two pair-table lookups; the byte offset of an entry is its
// index << kShift (copies of 4 bytes), so one shift and one and-or form the address.
// FP8 codes: four per word, widened exactly (e4m3 by cvt, e4b15 by integer ops).
template <int KB, int kShift, core::Fp8Format F8, int W>
__device__ __forceinline__ void key_fragment(const std::uint32_t (&kw)[W], int ks, const std::uint8_t* lut_lane,
                                             std::uint32_t lane_off, std::uint32_t& r0, std::uint32_t& r1) {
  if constexpr (KB == 8 && F8 == core::Fp8Format::kE4b15) {
    r0 = e4b15x2_to_half2(kw[ks], kLowBytes);
    r1 = e4b15x2_to_half2(kw[ks], kHighBytes);
  } else if constexpr (KB == 8) {
    r0 = e4m3x2_to_half2(kw[ks] & 0xffffu);
    r1 = e4m3x2_to_half2(kw[ks] >> 16);
  } else {
    constexpr int kPairBits = 2 * KB;
    constexpr std::uint32_t kMask = ((1u << kPairBits) - 1u) << kShift;
    const int p0 = 4 * KB * ks;
    const int p1 = p0 + kPairBits;
    const std::uint32_t o0 = and_or(shifted_bits(kw, p0, kShift), kMask, lane_off);
    const std::uint32_t o1 = and_or(shifted_bits(kw, p1, kShift), kMask, lane_off);
    r0 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o0);
    r1 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o1);
  }
}

// A fragment register of V^T: (code of token a, code of token b) at the lane's
// local value dim j, as exact fp16 values code * value_frag_scale<VB>(j), or
// the codes themselves with kUnscaled (the same instruction count).
template <int VB, bool kUnscaled = false, int W>
__device__ __forceinline__ std::uint32_t value_fragment(const std::uint32_t (&a)[W], const std::uint32_t (&b)[W],
                                                        int j) {
  const float undo = kUnscaled ? 1.0f / value_frag_scale<VB>(j) : 1.0f;  // exact: powers of two
  if constexpr (VB == 4) {
    // Byte k of word w holds dims 8w+2k (low nibble) and 8w+2k+1 (high nibble).
    const int w = j / 8;
    const int k = (j % 8) / 2;
    const std::uint32_t sel = k | (k << 4) | ((4 + k) << 8) | ((4 + k) << 12);  // [a_k a_k b_k b_k]
    const std::uint32_t y = byte_perm(a[w], b[w], sel);
    return masked_codes_to_half2(y, (j % 2) ? 0x00f000f0u : 0x000f000fu, undo);
  } else {
    // 16-bit windows at bit 9i hold fields 3i, 3i+1, 3i+2 at offsets 0, 3, 6.
    const int i = j / 3;
    const std::uint32_t wa = shifted_bits(a, 9 * i, 0);
    const std::uint32_t wb = shifted_bits(b, 9 * i, 0);
    const std::uint32_t y = byte_perm(wa, wb, 0x5410u);
    return masked_codes_to_half2(y, 0x00070007u << (3 * (j % 3)), undo);
  }
}

}  // namespace turboquant::cuda::detail
