// The only place cache offsets are computed (facts §b, docs/FORMAT.md).
// One block of a paged SoA cache:
//   data region at 0:      [block_size][num_kv_heads][key bytes | value bytes]
//   metadata at meta_offset(): fp16 [num_kv_heads][meta_fields][block_size]
//   padding (0 or block_size*num_kv_heads bytes) at the end: never read or written.
// Coordinates are 32-bit; byte offsets are 64-bit so caches beyond 4 GiB work.
#pragma once

#include "turboquant/core/format.hpp"

namespace turboquant::core {

struct BlockLayout {
  Format format;
  int block_size = 16;
  int num_kv_heads = 1;

  TQ_HD constexpr std::int64_t record_bytes() const { return format.data_bytes(); }
  // Where the fp16 metadata region starts inside a block (= data region size).
  TQ_HD constexpr std::int64_t meta_offset() const {
    return std::int64_t{block_size} * num_kv_heads * format.data_bytes();
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
    return (std::int64_t{t} * num_kv_heads + h) * format.data_bytes();
  }
  TQ_HD constexpr std::int64_t value_data_offset(int t, int h) const {
    return key_data_offset(t, h) + format.key_data_bytes();
  }
  TQ_HD constexpr std::int64_t meta_field_offset(int t, int h, MetaField field) const {
    const std::int64_t element =
        (std::int64_t{h} * format.meta_fields() + format.field_index(field)) * block_size + t;
    return meta_offset() + 2 * element;
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
  if (l.meta_offset() % 2 != 0) return "block_size * num_kv_heads * data_bytes must be even (fp16 metadata alignment)";
  return nullptr;
}

// The worked example of docs/FORMAT.md and the measured numbers of facts §b.
static_assert(BlockLayout{preset_format(Preset::k4BitNc, 128), 16, 8}.meta_offset() == 16384);
static_assert(BlockLayout{preset_format(Preset::k4BitNc, 128), 16, 8}.block_bytes() == 17152);
static_assert(BlockLayout{preset_format(Preset::kK3V4Nc, 128), 16, 8}.meta_offset() == 14336);
static_assert(BlockLayout{preset_format(Preset::kK3V4Nc, 128), 16, 8}.block_bytes() == 15104);
static_assert(BlockLayout{preset_format(Preset::k3BitNc, 128), 16, 8}.meta_offset() == 12288);
static_assert(BlockLayout{preset_format(Preset::k3BitNc, 128), 16, 8}.block_bytes() == 13056);
static_assert(BlockLayout{preset_format(Preset::kK8V4, 128), 16, 8}.meta_offset() == 24576);
static_assert(BlockLayout{preset_format(Preset::kK8V4, 128), 16, 8}.block_bytes() == 25088);

}  // namespace turboquant::core
