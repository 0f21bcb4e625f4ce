// The CUDA dequantize (cuda::dequantize, cuda::dequantize_sequences): one
// thread per (item, KV head), an item being one slot of the list or one
// (sequence, position) of the block-table form. Each runs
// core::dequantize_token_head, the golden model's definition, so the fp32
// outputs are dequantize_reference's bits (compiled with --fmad=false, like the
// other bit-exact kernels); fp16 / bf16 outputs are those rounded to nearest
// even (core::store_element). The arrays are sized by the head_dim instance.
#pragma once

#include <cstdint>

#include "dequantize_params.hpp"
#include "turboquant/core/dequantize_token.hpp"
#include "turboquant/core/elements.hpp"

namespace turboquant::cuda::detail {

template <int D>
__global__ void __launch_bounds__(128) dequantize_kernel(DequantizeParams p) {
  const core::BlockLayout& l = p.layout;
  const int heads = l.num_kv_heads;
  const std::int64_t work = p.num_items * heads;
  const core::Rotation rot{p.rotation};
  float k[D], v[D], scratch[D];
  for (std::int64_t w = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; w < work;
       w += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t item = w / heads;
    const int h = static_cast<int>(w % heads);
    std::int64_t slot, row;
    if (p.slots != nullptr) {
      slot = p.slots[item];
      row = item * heads + h;
    } else {
      const int b = static_cast<int>(item / p.max_seq);
      const int j = static_cast<int>(item % p.max_seq);
      if (j >= p.seq_lens[b]) continue;
      const std::int32_t blk = p.block_table[std::int64_t{b} * p.max_blocks_per_seq + j / l.block_size];
      slot = std::int64_t{blk} * l.block_size + j % l.block_size;
      row = (std::int64_t{b} * heads + h) * p.max_seq + j;
    }
    const std::uint8_t* block = p.cache + l.block_base(slot / l.block_size);
    core::dequantize_token_head(l, block, static_cast<int>(slot % l.block_size), h, p.codebook, rot, p.original, k, v,
                                scratch);
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      core::store_element(p.keys, p.out_dtype, row * D + d, k[d]);
      core::store_element(p.values, p.out_dtype, row * D + d, v[d]);
    }
  }
}

}  // namespace turboquant::cuda::detail
