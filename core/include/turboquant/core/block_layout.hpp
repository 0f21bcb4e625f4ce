// The only place cache offsets are computed (facts §b, docs/FORMAT.md), for
// both layouts (core::LayoutKind). One block of a paged cache is
// block_bytes() = block_size * num_kv_heads * slot bytes, and:
//   SoA: data region at 0:      [block_size][num_kv_heads][key codes | value codes]
//        metadata at meta_offset(): fp16 [num_kv_heads][meta_fields][block_size]
//   AoS: [block_size][num_kv_heads][slot], slot = [key codes | key norm fp16 |
//        value codes | value scale fp16 | value zero fp16] (FP8: no norm)
// Either way the slot (t, h) has one record of format.record_bytes() bytes at
// head_key_offset(h) + t * token_stride() (SoA: its codes; AoS: all of it),
// and each metadata field f at meta_field_base(h, f) + t * meta_token_stride().
// Kernels use these strided forms; no kernel computes an offset of its own.
// Coordinates are 32-bit; byte offsets are 64-bit so caches beyond 4 GiB work.
#pragma once

#include "turboquant/core/format.hpp"

namespace turboquant::core {

struct BlockLayout {
  Format format;
  int block_size = 16;
  int num_kv_heads = 1;

  TQ_HD constexpr bool aos() const { return format.aos(); }
  // Bytes between the records of heads h and h + 1 of one slot: SoA the codes
  // of a slot, AoS the whole (even-sized) slot.
  TQ_HD constexpr std::int64_t record_stride() const {
    return aos() ? format.slot_bytes_aligned() : format.data_bytes();
  }
  // SoA: where the fp16 metadata region starts inside a block (= the data
  // region's size). AoS has no metadata region: the slots fill
  // used_block_bytes().
  TQ_HD constexpr std::int64_t meta_offset() const {
    return aos() ? used_block_bytes() : std::int64_t{block_size} * num_kv_heads * format.data_bytes();
  }
  // Bytes between consecutive blocks (vLLM's kv_cache.stride(0)).
  TQ_HD constexpr std::int64_t block_bytes() const {
    return std::int64_t{block_size} * num_kv_heads * format.slot_bytes_aligned();
  }
  // Bytes of a block that any kernel reads or writes (the rest is padding).
  TQ_HD constexpr std::int64_t used_block_bytes() const {
    return std::int64_t{block_size} * num_kv_heads * format.slot_bytes();
  }
  TQ_HD constexpr std::int64_t block_base(std::int64_t block) const { return block * block_bytes(); }

  // Byte offsets within a block of token slot `t` (0 <= t < block_size), head `h`.
  TQ_HD constexpr std::int64_t key_data_offset(int t, int h) const {
    return head_key_offset(h) + t * token_stride();
  }
  TQ_HD constexpr std::int64_t value_data_offset(int t, int h) const {
    return key_data_offset(t, h) + format.value_record_offset();
  }
  TQ_HD constexpr std::int64_t meta_field_offset(int t, int h, MetaField field) const {
    return meta_field_base(h, field) + meta_token_stride() * t;
  }

  // The strided forms, for loops that walk the slots of one head.
  // Bytes between the records of slots t and t + 1 of one head.
  TQ_HD constexpr std::int64_t token_stride() const { return std::int64_t{num_kv_heads} * record_stride(); }
  // Key record (value codes: head_value_offset) of head h at slot 0.
  TQ_HD constexpr std::int64_t head_key_offset(int h) const { return std::int64_t{h} * record_stride(); }
  TQ_HD constexpr std::int64_t head_value_offset(int h) const { return head_key_offset(h) + format.value_record_offset(); }
  // Bytes between one metadata field of slots t and t + 1 of one head: SoA 2
  // (the fields of consecutive slots are consecutive fp16 values), AoS the
  // token stride.
  TQ_HD constexpr std::int64_t meta_token_stride() const { return aos() ? token_stride() : 2; }
  // Metadata of head h at slot 0: the stored field number i (0 <= i <
  // format.meta_fields(), in stored order: FP8 formats store no key norm), or
  // the named field.
  TQ_HD constexpr std::int64_t meta_base(int h, int i) const {
    if (aos()) return head_key_offset(h) + format.aos_meta_offset(i);
    return meta_offset() + std::int64_t{2} * block_size * (std::int64_t{h} * format.meta_fields() + i);
  }
  TQ_HD constexpr std::int64_t meta_field_base(int h, MetaField field) const {
    return meta_base(h, format.field_index(field));
  }
};

// Why a block layout cannot be used, or nullptr. The fp16 metadata region must
// start at an even byte offset for vLLM's u16 view of the block.
inline constexpr const char* layout_problem(const BlockLayout& l) {
  if (const char* p = format_problem(l.format)) return p;
  if (l.block_size < 1) return "block_size must be >= 1";
  if (l.block_size > 4096) return "block_size must be <= 4096";
  if (l.num_kv_heads < 1) return "num_kv_heads must be >= 1";
  if (l.num_kv_heads > 4096) return "num_kv_heads must be <= 4096";
  if (!l.aos() && l.meta_offset() % 2 != 0) return "block_size * num_kv_heads * data_bytes must be even (fp16 metadata alignment)";
  return nullptr;
}

// The worked example of docs/FORMAT.md and the measured numbers of facts §b:
// (preset, meta_offset, block_bytes) at head_dim 128, block_size 16, 8 KV heads.
struct CanonicalBlock {
  Preset preset;
  std::int64_t meta_offset;
  std::int64_t block_bytes;
};
inline constexpr CanonicalBlock kCanonicalBlocks[] = {
    {Preset::k4BitNc, 16384, 17152},
    {Preset::kK3V4Nc, 14336, 15104},
    {Preset::k3BitNc, 12288, 13056},
    {Preset::kK8V4, 24576, 25088},
};
constexpr bool canonical_blocks_hold() {
  for (const CanonicalBlock& c : kCanonicalBlocks) {
    const BlockLayout l{preset_format(c.preset, 128), 16, 8};
    if (l.meta_offset() != c.meta_offset || l.block_bytes() != c.block_bytes) return false;
  }
  return true;
}
static_assert(canonical_blocks_hold(), "a block size differs from facts §b");

// The AoS worked example of docs/FORMAT.md (4bit_nc, D 128, block 16, 8 KV
// heads): slot (t 3, h 5) starts at (3 * 8 + 5) * 134 = 3886; its norm at
// + 64, its value codes at + 66, scale at + 130, zero at + 132.
inline constexpr BlockLayout kAosExample{preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS), 16, 8};
static_assert(kAosExample.key_data_offset(3, 5) == 3886 && kAosExample.value_data_offset(3, 5) == 3952);
static_assert(kAosExample.meta_field_offset(3, 5, MetaField::kKeyNorm) == 3950);
static_assert(kAosExample.meta_field_offset(3, 5, MetaField::kValueScale) == 4016);
static_assert(kAosExample.meta_field_offset(3, 5, MetaField::kValueZero) == 4018);
static_assert(kAosExample.block_bytes() == 17152 && kAosExample.used_block_bytes() == 17152);

}  // namespace turboquant::core
