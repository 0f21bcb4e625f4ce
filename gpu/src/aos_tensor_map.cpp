#include "aos_tensor_map.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdlib>
#include <cstring>

#include "aos_tensor_box.hpp"
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

}  // namespace

bool aos_tensor_copies_enabled() {
  static const bool enabled = [] {
    const char* loader = std::getenv("TQ_FAST_AOS_LOADER");
    return loader == nullptr || std::strcmp(loader, "cp.async") != 0;
  }();
  return enabled;
}

bool encode_aos_tensor_map(const core::BlockLayout& l, const void* cache, std::int64_t num_blocks, CUtensorMap* map) {
  if (!aos_tensor_copy_fits(l) || num_blocks <= 0 || num_blocks > (std::int64_t{1} << 32) ||
      reinterpret_cast<std::uintptr_t>(cache) % 16 != 0) {
    return false;
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(l.token_stride()), static_cast<cuuint64_t>(l.block_size),
                              static_cast<cuuint64_t>(num_blocks)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(l.token_stride()), static_cast<cuuint64_t>(l.block_bytes())};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(aos_row_bytes(l.format)), core::kTileTokens, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(cache), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace turboquant::cuda::detail
