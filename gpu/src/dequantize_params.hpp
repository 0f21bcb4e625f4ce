// The dequantize kernel's parameters (gpu/src/dequantize.cuh) and launcher,
// for host code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fast_divisor.hpp"
#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/codebook.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::cuda::detail {

struct DequantizeParams {
  core::BlockLayout layout;
  const std::uint8_t* cache = nullptr;
  // The list form: slots[i] for i < num_items (device int64); null for the
  // block-table form: item = b * max_seq + j.
  const std::int64_t* slots = nullptr;
  const std::int32_t* block_table = nullptr;  // [batch, max_blocks_per_seq]
  const std::int32_t* seq_lens = nullptr;     // [batch]
  int max_blocks_per_seq = 0;
  int max_seq = 0;
  std::int64_t num_items = 0;  // num_slots, or batch * max_seq
  std::int64_t num_blocks = 0;  // of the cache
  // Set by launch_dequantize: the records, num_items * Hk; whether they and
  // num_blocks * block_size fit 32 bits (the kernel's index arithmetic is
  // then 32-bit).
  std::int64_t work = 0;
  bool narrow_indices = false;
  // Set by launch_dequantize: Hk, max_seq (block-table form) and block_size.
  FastDivisor heads_div, max_seq_div, block_size_div;
  void* keys = nullptr;
  void* values = nullptr;
  DType out_dtype = DType::kFloat32;
  bool original = true;          // Basis::kOriginal
  const float* rotation = nullptr;  // dense PiT (device) or null: Hadamard
  core::Codebook codebook;
};

// The kernel over p.num_items * Hk (item, head) pairs; a head_dim without an
// instance is cudaErrorInvalidValue (dequantize_can_implement refuses it first).
cudaError_t launch_dequantize(const DequantizeParams& p, cudaStream_t stream);

// The kernels of one head_dim (dequantize_launch.cuh; instantiated by the
// generated dequantize_kernels_d<D>.cu), called by launch_dequantize.
template <int D>
cudaError_t launch_dequantize_dim(const DequantizeParams& p, cudaStream_t stream);

}  // namespace turboquant::cuda::detail
