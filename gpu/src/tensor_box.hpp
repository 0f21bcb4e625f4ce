// The fast decode's tensor copies (FastTensorLoader, fast_loader.cuh): one
// lane issues a tile's boxes of the Tensor Memory Accelerator, into the stage
// rows the cp.async loader fills, instead of every lane's share of 16-byte
// copies. The cache is described as bytes x positions x blocks (strides
// token_stride() and block_bytes(), multiples of 16), a box as 16 rows:
//   SoA  the records of the tile's 16 slots of one KV head (x: the head's
//        record, 16-byte aligned when the record size is a multiple of 16),
//        plus a box of the tile's metadata from the fields map (bytes of a
//        field x (head, field) rows x blocks: 32 bytes of each of the head's
//        fields), which lands as SoA's stage metadata.
//   AoS  the 16-byte units that cover each slot (x: the unit of the head's
//        first slot). A box cannot start at a slot's own first byte: its start
//        in the innermost dimension must be 16-byte aligned (on the H200 a box
//        at byte 100 of a position stopped the kernel with "illegal
//        instruction", docs/PERFORMANCE.md round 12).
// A box may read past its record into the neighbouring one (or past the
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
// Bytes of a staged record row (both loaders; a box row).
TQ_HD constexpr int stage_row_bytes(const core::Format& f) {
  return f.aos() ? padded_aos_row_bytes(16 * aos_span_units(f)) : padded_row_bytes(f.record_bytes());
}
inline constexpr int kMaxBoxBytes = 256;     // the Tensor Memory Accelerator's box limit per dimension
inline constexpr int kMetaBoxBytes = 32;     // SoA: one field of a 16-token tile (fp16)

// Whether boxes can carry this format's tiles: a staged row fits in a box
// (SoA: records of a multiple of 16 bytes, so that every head's record starts
// aligned).
TQ_HD constexpr bool tensor_copy_boxable(const core::Format& f) {
  return stage_row_bytes(f) <= kMaxBoxBytes && (f.aos() || f.record_bytes() % 16 == 0);
}
// Whether the single-token and two-tile fast kernels of this format take
// tensor copies where the strides allow: the copies paid on the H200 (round
// 12, D 128, tensor copies / cp.async at 16 x 32768 and 32 x 8192, the same
// binary): AoS 4bit_nc 0.93, k3v4_nc 0.95-0.96; SoA k3v4_nc 0.97. They did not
// pay elsewhere: 3bit_nc 1.00-1.01 in both layouts, SoA 4bit_nc 1.00 (1.025 at
// 1 x 4096), k8v4 1.03-1.14 in both layouts (the kernels of 3-bit and FP8 keys
// run 4 warps per block, 4-bit keys 8). The wide multi-token kernel takes
// them for every boxable format (wide_tensor_copy_fits).
TQ_HD constexpr bool tensor_copy_format(const core::Format& f) {
  if (!tensor_copy_boxable(f) || f.fp8_keys() || f.value_bits != 4) return false;
  return f.aos() || f.key_bits == 3;
}
// The strides of this layout are multiples of 16 (AoS: num_kv_heads x slot
// bytes, e.g. 8 heads of 134-byte slots; SoA: any head count).
TQ_HD constexpr bool tensor_copy_strides(const core::BlockLayout& l) {
  return l.token_stride() % 16 == 0 && l.token_stride() <= (std::int64_t{1} << 32) &&
         (l.aos() || (2 * l.block_size) % 16 == 0);
}
TQ_HD constexpr bool tensor_copy_fits(const core::BlockLayout& l) {
  return tensor_copy_format(l.format) && tensor_copy_strides(l);
}
TQ_HD constexpr bool wide_tensor_copy_fits(const core::BlockLayout& l) {
  return tensor_copy_boxable(l.format) && tensor_copy_strides(l);
}

// The canonical shapes, frozen (D 128): 134-byte AoS slots cover at most 10
// units, staged in rows of 11; 8 KV heads make a 1072-byte token stride.
namespace tensor_box_checks {
constexpr core::Format kAos4 = core::preset_format(core::Preset::k4BitNc, 128, core::LayoutKind::kAoS);
constexpr core::Format kSoaK3v4 = core::preset_format(core::Preset::kK3V4Nc, 128, core::LayoutKind::kSoA);
static_assert(aos_span_units(kAos4) == 10 && stage_row_bytes(kAos4) == 176);
static_assert(tensor_copy_fits(core::BlockLayout{kAos4, 16, 8}) && !tensor_copy_fits(core::BlockLayout{kAos4, 16, 2}));
static_assert(stage_row_bytes(kSoaK3v4) == 112 && tensor_copy_fits(core::BlockLayout{kSoaK3v4, 16, 8}));
static_assert(!tensor_copy_format(core::preset_format(core::Preset::k4BitNc, 128)));
static_assert(!tensor_copy_format(core::preset_format(core::Preset::kK8V4, 128, core::LayoutKind::kAoS)));
static_assert(wide_tensor_copy_fits(core::BlockLayout{core::preset_format(core::Preset::k4BitNc, 128), 16, 8}));
static_assert(wide_tensor_copy_fits(core::BlockLayout{core::preset_format(core::Preset::kK8V4, 128), 16, 8}));
}  // namespace tensor_box_checks

}  // namespace turboquant::cuda::detail
