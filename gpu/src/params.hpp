// Kernel parameter blocks (passed by value; trivially copyable). The host
// fills them after can_implement; kernels assume validated input.
#pragma once

#include <cstdint>

#include "fast_divisor.hpp"
#include "pace_plan.hpp"
#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/bucket_grid.hpp"
#include "turboquant/core/codebook.hpp"
#include "turboquant/core/partial_layout.hpp"
#include "turboquant/dtype.hpp"

namespace turboquant::cuda::detail {

// Query heads one block handles (a chunk of the GQA group). The strict kernel's
// warps keep all heads of their chunk in registers: 1, 2 or 4 (groups over 4 are
// cut into chunks of 4).
inline constexpr int kStrictHeadsPerBlock = 4;
inline constexpr int strict_heads_per_block(int group) { return group <= 1 ? 1 : group == 2 ? 2 : kStrictHeadsPerBlock; }
inline constexpr int kFastHeadsPerBlock = 8;  // the fast kernel's mma N dimension

struct DecodeParams {
  core::BlockLayout layout;
  FastDivisor block_size_div;  // layout.block_size: a token's page of the block table (strict kernels)
  const std::uint8_t* cache = nullptr;
  std::int64_t num_blocks = 0;
  const void* query = nullptr;  // [batch, num_q_heads, D] of query_dtype
  DType query_dtype = DType::kFloat32;
  const std::int32_t* block_table = nullptr;  // [batch, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  const std::int32_t* seq_lens = nullptr;  // [batch]
  int batch = 0;
  int num_q_heads = 0;
  int group = 0;              // num_q_heads / num_kv_heads
  int heads_per_block = 0;    // query heads one block handles (a chunk of the group)
  int chunks_per_kv_head = 0; // ceil(group / heads_per_block)
  int num_splits = 0;   // stride of the partials in the workspace (>= plan_splits)
  int plan_splits = 0;  // splits of the plan (the grid's x); strict: num_splits
  float query_factor = 0.0f;  // mul_rn(softmax_scale, kLog2e)
  const float* rotation = nullptr;  // dense PiT [D][D] (device) or nullptr: Hadamard
  // Strict mode: the codebook. Fast mode with Lloyd-Max keys: its centroids
  // times the centroid scale s (decode_plan.cpp's fast_centroid_scale), the
  // values of the kernel's fp16 pair table, with query_factor divided by s,
  // so that the scores (s c) . (q / s) carry less of fp16's rounding of c.
  core::Codebook codebook;
  float fast_squares_unscale = 1.0f;  // fast AoS norm correction: 1 / s^2 times the summed squares
  // Fast mode with tensor_copy_fits (tensor_box.hpp): tiles arrive by tensor
  // copies, described by the maps the fast kernel takes beside p.
  bool tensor_copy = false;
  // Workspace: partial accumulators [batch][num_q_heads][num_splits][D] and
  // partial (max, sum) [batch][num_q_heads][num_splits][2].
  // Partial (row, split) is at partials(D) (core::PartialLayout) in both.
  float* partial_acc = nullptr;
  float* partial_ml = nullptr;
  void* out = nullptr;  // [batch, num_q_heads, D] of out_dtype
  DType out_dtype = DType::kFloat32;
  float* lse = nullptr;  // [rows, num_q_heads] or nullptr

  // Query rows (docs/ARITHMETIC.md §7): the kernels' and the merge's row
  // dimension (query, out, lse and the partials are per row); row r's sequence
  // and attended range come from query_row() (query_rows.cuh). Without
  // query_start_loc, rows == batch and row r is sequence r.
  int rows = 0;
  const std::int32_t* query_start_loc = nullptr;  // [batch + 1] or nullptr
  const float* sinks = nullptr;                   // [num_q_heads] or nullptr
  int sliding_window = 0;                          // 0: unlimited
  int fast_rows_per_block = 1;  // fast mode: query rows of one block (fast_rows_per_block(), query_rows.cuh)
  int fast_column_tiles = 1;    // fast mode: mma n-tiles of 8 columns per block (fast_column_tiles(), fast_plan.hpp)
  int fast_warps = 0;           // fast mode, two column tiles: kFastDeepWarps per block, or 0: the format's; wide: kWideSpecializedWarps for warpgroups in roles, or 0 (fast_plan.hpp)
  int fast_kv_heads_per_block = 1;  // fast mode: KV heads of a block; > 1: fused heads (fast_plan.hpp)
  int pace_cluster = 1;         // blocks per cluster along grid y (AoS head pacing, cluster_pace.cuh); 1: none
  int pace_tiles = 0;           // pace_cluster > 1: a warp's tiles between its cluster arrivals

  // Where every kernel and the merge find a partial: accumulators of head_dim
  // floats, num_splits per row.
  TQ_HD constexpr core::PartialLayout partials(int head_dim) const { return core::PartialLayout{head_dim, num_splits}; }
};

// Programmatic dependent launch (sm_90): the decode kernels let the merge grid
// start launching once their main loops are done; the merge waits for the
// decode grid's completion (and its memory) before reading the partials.
// Placement of the trigger affects scheduling only, never correctness.
#if defined(__CUDACC__)
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void pdl_wait_for_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif

struct EncodeParams {
  core::BlockLayout layout;
  std::uint8_t* cache = nullptr;
  const void* keys = nullptr;    // [num_tokens, Hk, D] of dtype
  const void* values = nullptr;  // [num_tokens, Hk, D] of dtype
  DType dtype = DType::kFloat32;
  std::int64_t num_tokens = 0;
  const std::int64_t* slot_mapping = nullptr;  // [num_tokens]
  const float* rotation = nullptr;             // dense PiT (device) or nullptr: Hadamard
  core::Codebook codebook;
  core::BucketGrid grid;  // make_bucket_grid(codebook); binary search when not usable
};

}  // namespace turboquant::cuda::detail
