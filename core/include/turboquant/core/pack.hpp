// 3-bit and 4-bit code packing (facts §c). Key indices and value codes share it.
//   4-bit: byte k = dim 2k (low nibble) | dim 2k+1 (high nibble).
//   3-bit: dims in groups of 8; group g is the 24-bit little-endian word
//          sum_j code[8g+j] << 3j in bytes 3g, 3g+1, 3g+2.
// head_dim is a multiple of 16 (format_problem), so groups are always whole.
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

TQ_HD constexpr int unpack_code4(const std::uint8_t* bytes, int d) {
  const int b = bytes[d >> 1];
  return (d & 1) ? (b >> 4) : (b & 0xf);
}

TQ_HD constexpr int unpack_code3(const std::uint8_t* bytes, int d) {
  const std::uint8_t* g = bytes + 3 * (d >> 3);
  const std::uint32_t word = g[0] | (std::uint32_t{g[1]} << 8) | (std::uint32_t{g[2]} << 16);
  return static_cast<int>((word >> (3 * (d & 7))) & 7u);
}

TQ_HD constexpr int unpack_code(int bits, const std::uint8_t* bytes, int d) {
  return bits == 4 ? unpack_code4(bytes, d) : unpack_code3(bytes, d);
}

// Unpacks all `dims` codes (dims % 8 == 0).
TQ_HD constexpr void unpack_codes(int bits, const std::uint8_t* bytes, int dims, std::uint8_t* codes) {
  for (int d = 0; d < dims; ++d) codes[d] = static_cast<std::uint8_t>(unpack_code(bits, bytes, d));
}

// Packs `dims` codes (each < 2^bits, dims % 8 == 0) into exactly dims*bits/8 bytes.
TQ_HD constexpr void pack_codes(int bits, const std::uint8_t* codes, int dims, std::uint8_t* bytes) {
  if (bits == 4) {
    for (int k = 0; k < dims / 2; ++k) bytes[k] = static_cast<std::uint8_t>(codes[2 * k] | (codes[2 * k + 1] << 4));
    return;
  }
  for (int g = 0; g < dims / 8; ++g) {
    std::uint32_t word = 0;
    for (int j = 0; j < 8; ++j) word |= std::uint32_t{codes[8 * g + j]} << (3 * j);
    bytes[3 * g] = static_cast<std::uint8_t>(word);
    bytes[3 * g + 1] = static_cast<std::uint8_t>(word >> 8);
    bytes[3 * g + 2] = static_cast<std::uint8_t>(word >> 16);
  }
}

}  // namespace turboquant::core
