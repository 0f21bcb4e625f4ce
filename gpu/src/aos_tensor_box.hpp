// The fast decode's tensor copies of AoS tiles (FastTensorLoader,
// fast_loader.cuh). vLLM's AoS slots are only 2-byte aligned, so 16-byte
// cp.async copies land them at a different phase of their staged row for
// every other KV head, and the stage reader pays word loads and funnel shifts
// for it. The Tensor Memory Accelerator copies a box that starts at any byte:
// a tile (16 slots of one KV head) arrives as two boxes of kTileTokens rows of
// aos_box_bytes(f) bytes each, the key part (codes, fp16 norm) and the value
// part (codes, scale, zero), every part at the start of its row. The cache is
// described to it as bytes x positions x blocks (strides token_stride() and
// block_bytes(), which must be multiples of 16); a box may read past its part
// into the neighbouring slot (or past the position's last byte, filled with
// zeros): those bytes are never read from the stage.
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

// Row bytes of both boxes: the larger part of the slot, padded as above.
TQ_HD constexpr int aos_box_bytes(const core::Format& f) {
  const int key_part = f.value_record_offset();
  const int value_part = f.slot_bytes() - key_part;
  return padded_row_bytes(key_part > value_part ? key_part : value_part);
}
inline constexpr int kMaxBoxBytes = 256;  // the Tensor Memory Accelerator's box limit per dimension

// Whether the fast decode of this AoS layout takes tensor copies (else the
// cp.async loader): a row of kTileTokens x 2 boxes fits, and the strides are
// multiples of 16 (num_kv_heads x slot bytes; e.g. 8 heads of 134-byte slots).
TQ_HD constexpr bool aos_tensor_copy_fits(const core::BlockLayout& l) {
  return l.aos() && aos_box_bytes(l.format) <= kMaxBoxBytes && l.token_stride() % 16 == 0 &&
         l.token_stride() <= (std::int64_t{1} << 32);
}

}  // namespace turboquant::cuda::detail
