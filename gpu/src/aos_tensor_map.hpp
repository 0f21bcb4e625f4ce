// The host side of the fast decode's AoS tensor copies (aos_tensor_box.hpp):
// the tensor map of a cache, encoded by the driver's cuTensorMapEncodeTiled,
// which the runtime hands out (no link against the driver library).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "turboquant/core/block_layout.hpp"

namespace turboquant::cuda::detail {

// The map of `cache` (num_blocks blocks of layout l, aos_tensor_copy_fits(l),
// 16-byte aligned) for boxes of aos_row_bytes x 16 positions x 1 block; false
// when the driver offers no encoder or refuses (the caller then keeps the
// cp.async loader).
bool encode_aos_tensor_map(const core::BlockLayout& l, const void* cache, std::int64_t num_blocks, CUtensorMap* map);

// False when the environment sets TQ_FAST_AOS_LOADER=cp.async (read once): the
// benchmarks' way to time both loaders in one process. It changes which
// kernel instance reads the cache, never what any call writes to it.
bool aos_tensor_copies_enabled();

}  // namespace turboquant::cuda::detail
