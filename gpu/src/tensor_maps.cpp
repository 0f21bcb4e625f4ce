#include "tensor_maps.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdlib>
#include <cstring>

#include "tensor_box.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return PFN_cuTensorMapEncodeTiled_v12000{nullptr};
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}

// A 3-D map of bytes (dims[0] x dims[1] x dims[2], row strides[0], block
// strides[1]) with boxes of box_x x box_y x 1.
bool encode_bytes(PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap* map, const void* base, std::int64_t d0,
                  std::int64_t d1, std::int64_t d2, std::int64_t row_stride, std::int64_t block_stride, int box_x,
                  int box_y) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d0), static_cast<cuuint64_t>(d1), static_cast<cuuint64_t>(d2)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_stride), static_cast<cuuint64_t>(block_stride)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_x), static_cast<cuuint32_t>(box_y), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

bool tensor_copies_enabled() {
  static const bool enabled = [] {
    const char* loader = std::getenv("TQ_FAST_LOADER");
    return loader == nullptr || std::strcmp(loader, "cp.async") != 0;
  }();
  return enabled;
}

bool encode_tensor_maps(const core::BlockLayout& l, const void* cache, std::int64_t num_blocks, FastTensorMaps* maps) {
  if (!wide_tensor_copy_fits(l) || num_blocks <= 0 || num_blocks > (std::int64_t{1} << 32) ||
      reinterpret_cast<std::uintptr_t>(cache) % 16 != 0) {
    return false;
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  *maps = FastTensorMaps{};
  if (!encode_bytes(encode, &maps->tiles, cache, l.token_stride(), l.block_size, num_blocks, l.token_stride(),
                    l.block_bytes(), stage_row_bytes(l.format), core::kTileTokens)) {
    return false;
  }
  if (l.aos()) return true;
  // SoA metadata: field i of head h is row h * fields + i of 2 * block_size bytes.
  const int fields = l.format.meta_fields();
  return encode_bytes(encode, &maps->meta, static_cast<const std::uint8_t*>(cache) + l.meta_offset(),
                      2 * l.block_size, std::int64_t{l.num_kv_heads} * fields, num_blocks, 2 * l.block_size,
                      l.block_bytes(), kMetaBoxBytes, fields);
}

}  // namespace turboquant::cuda::detail
