// The fast decode's tensor copies of AoS tiles (FastTensorLoader,
// fast_loader.cuh). A tile (16 slots of one KV head) is one box of the Tensor
// Memory Accelerator: 16 rows of aos_row_bytes(f) bytes that start at the
// 16-byte unit holding the slot's first byte, the same rows the cp.async
// loader fills (the slot at its address mod 16 in its row), issued by one
// lane instead of every lane's share of 16-byte copies. The cache is
// described to it as bytes x positions x blocks (strides token_stride() and
// block_bytes(), which must be multiples of 16). A box's start in its
// innermost dimension must be 16-byte aligned as well: on the H200 a box at
// byte 100 of a position stopped the kernel with "illegal instruction"
// (docs/PERFORMANCE.md round 12), so a box cannot start at a slot's own first
// byte. A box may read past the slot into the neighbouring one (or past the
// position's last byte, filled with zeros): those bytes are never read.
#pragma once

#include <cstdint>

#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/hd.hpp"

namespace turboquant::cuda::detail {

// Smallest multiple of 16 >= bytes whose row stride puts the value chunks of
// tokens 2c (c = 0..3) in different bank octets (stride mod 64 is 16 or 48).
TQ_HD constexpr int padded_row_bytes(int bytes) {
  int r = (bytes + 15) / 16 * 16;
  while (r % 64 != 16 && r % 64 != 48) r += 16;
  return r;
}
// AoS rows are read with 4-byte loads of interleaved words (lane c: words c,
// c + 4, ...): a row stride of an odd number of 16-byte units puts the words
// of the 32 lanes (8 rows x 4 words, or 4 rows x 8 words) on 32 banks.
TQ_HD constexpr int padded_aos_row_bytes(int bytes) {
  int r = (bytes + 15) / 16 * 16;
  while (r % 32 != 16) r += 16;
  return r;
}
// The 16-byte units a 2-byte aligned AoS slot covers at most.
TQ_HD constexpr int aos_span_units(const core::Format& f) { return (f.record_bytes() + 14 + 15) / 16; }
// Bytes of a staged AoS row (both loaders) and of a box's row.
TQ_HD constexpr int aos_row_bytes(const core::Format& f) { return padded_aos_row_bytes(16 * aos_span_units(f)); }
inline constexpr int kMaxBoxBytes = 256;  // the Tensor Memory Accelerator's box limit per dimension

// Whether the fast decode of this AoS format takes tensor copies where the
// strides allow: Lloyd-Max keys whose row fits in a box. FP8 keys keep the
// cp.async loader: with tensor copies k8v4 ran 1.14x its time at 16 x 32768
// (H200, round 12; its 240-byte box rows read 2 units past a 196-byte slot's
// span, and it is the preset closest to the copy ceiling), 4bit_nc 0.93x.
TQ_HD constexpr bool aos_tensor_copy_format(const core::Format& f) {
  return f.aos() && !f.fp8_keys() && aos_row_bytes(f) <= kMaxBoxBytes;
}
// ... and the strides of this layout are multiples of 16 (num_kv_heads x slot
// bytes; e.g. 8 heads of 134-byte slots).
TQ_HD constexpr bool aos_tensor_copy_fits(const core::BlockLayout& l) {
  return aos_tensor_copy_format(l.format) && l.token_stride() % 16 == 0 &&
         l.token_stride() <= (std::int64_t{1} << 32);
}

}  // namespace turboquant::cuda::detail
