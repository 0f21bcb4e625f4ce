// The host side of the fast decode's tensor copies (tensor_box.hpp): the maps
// of a cache, encoded by the driver's cuTensorMapEncodeTiled, which the
// runtime hands out (no link against the driver library).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "turboquant/core/block_layout.hpp"

namespace turboquant::cuda::detail {

// The fast kernel's first parameter (a __grid_constant__: the copy engine
// reads the maps where the launch put them; 64-byte aligned).
struct FastTensorMaps {
  CUtensorMap tiles;  // records (SoA) or slots (AoS): stage_row_bytes x 16 positions x 1 block
  CUtensorMap meta;   // SoA: the metadata fields, kMetaBoxBytes x meta_fields x 1 block; AoS: unused
};

// The maps of `cache` (num_blocks blocks of layout l, wide_tensor_copy_fits(l),
// 16-byte aligned); false when the driver offers no encoder or refuses (the
// caller then keeps the cp.async loader).
bool encode_tensor_maps(const core::BlockLayout& l, const void* cache, std::int64_t num_blocks, FastTensorMaps* maps);

// False when the environment sets TQ_FAST_LOADER=cp.async (read once): the
// benchmarks' way to time both loaders in one process. It changes which
// kernel instance reads the cache, never what any call writes to it.
bool tensor_copies_enabled();

}  // namespace turboquant::cuda::detail
