// The fast decode's grid (plan_fast_grid, decode_setup.hpp): the splits of a
// sequence, the warps of a block, blocks of fused KV heads and the AoS head
// pacing, from the layer's shape and the device's occupancy. make_plan
// (decode_plan.cpp) calls it once per plan.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "decode_setup.hpp"
#include "launch.hpp"
#include "pace_plan.hpp"

namespace turboquant::cuda::detail {

FastWave fast_wave(const core::BlockLayout& l, bool has_query_start_loc, int rows, int group, int column_tiles,
                   bool tensor_copy, int warps) {
  const int rows_per_block = fast_rows_per_block(has_query_start_loc, group, column_tiles);
  const int chunks = (group + kFastHeadsPerBlock - 1) / kFastHeadsPerBlock;
  const std::int64_t row_blocks = (std::int64_t{rows} + rows_per_block - 1) / rows_per_block;
  return FastWave{row_blocks * l.num_kv_heads * chunks,
                  std::int64_t{device_sm_count()} * fast_decode_occupancy(l.format, tensor_copy, column_tiles, warps)};
}


namespace {

// The cluster of the AoS head pacing (cluster_pace.cuh) for grid y = grid_y,
// or 1 (PERFORMANCE.md rounds 20, 21 and 28 have the measurements); plans of
// fused heads (fused_heads_splits) are never paced.
//   What: pace_capable instances, those of one column tile (single-token
//   rows, and multi-token rows or windows of up to 8 columns a block): the
//   tensor-copy ones (AoS 4bit_nc and k3v4_nc), whose boxes read whole 16-byte
//   units around every slot (on an H100 pacing made the single-token ones
//   0.71-0.87x as long at 32 x 8192 and 16 x 32768, the one-tile q_len 2
//   rows 0.79-0.89x), and the FP8 ones (k8v4,
//   cp.async: 0.96-0.97x at 32 x 8192 and 16 x 32768); the 3-bit cp.async
//   instances lost 7-10%, the multi-token rows' two-tile instance 7-10%.
//   Clusters need sm_90, as tensor copies do (device_has_tensor_copies).
//   Where: devices of less DRAM bandwidth per SM than kPaceMaxDramMbpsPerSm
//   (an H100; on an H200 the same plan cost 9-10%).
//   Size: the largest cluster the policy allows of which the device holds as
//   many blocks as of single blocks, so that pacing never costs resident warps
//   (clusters of 8 of the 4-bit instance: 240 of its 264 blocks on both).
// A forced policy paces wherever a cluster divides grid y.
int pace_cluster_for(const core::BlockLayout& l, int grid_y, bool tensor_copy, int column_tiles, int warps) {
  if (!pace_capable(l.aos(), column_tiles == 1, tensor_copy, l.format.fp8_keys()) || !device_has_tensor_copies()) {
    return 1;
  }
  const PacePolicy policy = pace_policy();
  if (!policy.force && device_dram_mbps_per_sm() >= kPaceMaxDramMbpsPerSm) return 1;
  const std::int64_t blocks =
      std::int64_t{device_sm_count()} * fast_decode_occupancy(l.format, tensor_copy, column_tiles, warps);
  // Each halving still divides grid_y.
  for (int c = pace_cluster_size(grid_y, policy.max_cluster); c > 1; c /= 2) {
    const int resident = fast_decode_cluster_residency(l.format, tensor_copy, column_tiles, warps, c);
    if (resident > 0 && (policy.force || resident >= blocks)) return c;
  }
  return 1;
}

// The splits of a plan of blocks of fused heads (fast_plan.hpp's
// fast_fusable_heads; `column_tiles`, `warps` per block as DecodeParams), or
// 0 where the plan keeps one KV head a block: under FusedPolicy::kAuto, fused
// blocks are taken where their non-empty splits (of the longest sequence the
// block table holds) give at least as many blocks as the unfused plan's
// `unfused_splits`, up to one wave, and each warp streams a long run of its
// head's tiles (fast_fused_pays_off). Small batches of short sequences keep
// one head a block (1 x 4096: 64 fused blocks of the 64-token minimum split
// against 256; with multi-token rows, 128 fused blocks but 64 tokens a warp;
// 8 x 8192: 256 tokens a warp).
std::int64_t fused_heads_splits(const core::BlockLayout& l, bool has_query_start_loc, int rows, int group,
                                int column_tiles, int warps, bool tensor_copy, std::int64_t max_seq_tokens, int stride,
                                std::int64_t unfused_splits) {
  const FusedPolicy policy = fused_policy();
  if (policy == FusedPolicy::kOff) return 0;
  const FastWave w = fast_wave(l, has_query_start_loc, rows, group, column_tiles, tensor_copy, warps);
  if (w.resident <= 0) return 0;
  // KV heads divide into whole blocks (fast_fusable_heads).
  const int heads = fast_fused_kv_heads(column_tiles, l.format.key_bits);
  const std::int64_t units = w.units / heads;
  const std::int64_t splits = std::clamp<std::int64_t>(w.resident / std::max<std::int64_t>(units, 1), 1, stride);
  const int tokens = static_cast<int>(std::min<std::int64_t>(max_seq_tokens, INT_MAX));
  const std::int64_t fused_blocks = units * plan_nonempty(true, tokens, static_cast<int>(splits));
  const std::int64_t unfused_blocks = w.units * plan_nonempty(true, tokens, static_cast<int>(unfused_splits));
  if (policy == FusedPolicy::kForce) return splits;
  const int warps_per_head = (warps > 0 ? warps : fast_format_warps(l.format.key_bits)) / heads;
  const bool busy = fused_blocks >= std::min(w.resident, unfused_blocks);
  return busy && fast_fused_pays_off(max_seq_tokens, splits, warps_per_head) ? splits : 0;
}

}  // namespace

void plan_fast_grid(const core::BlockLayout& l, bool has_query_start_loc, int rows, bool dense_rotation,
                    std::int64_t max_seq_tokens, int num_splits, DecodeParams& p) {
  // About one wave of blocks at full occupancy: fewer, longer splits for
  // large batches, more splits (up to the workspace's stride) for small.
  // Two column tiles take twelve-warp blocks where their splits of the
  // longest sequence the block table holds are long (fast_deep_pays_off).
  const int column_tiles = p.fast_column_tiles;
  const int stride = p.num_splits;
  auto splits_for = [&](int warps) -> std::int64_t {
    const FastWave w = fast_wave(l, has_query_start_loc, rows, p.group, column_tiles, p.tensor_copy, warps);
    if (w.resident <= 0) return num_splits;
    return std::clamp<std::int64_t>(w.resident / std::max<std::int64_t>(w.units, 1), 1, stride);
  };
  std::int64_t splits = 0;
  if (column_tiles == kFastWideColumnTiles && wide_kernel_specialized()) p.fast_warps = kWideSpecializedWarps;
  if (column_tiles == 2) {
    splits = splits_for(kFastDeepWarps);
    if (fast_deep_pays_off(max_seq_tokens, splits)) p.fast_warps = kFastDeepWarps;
  }
  if (splits == 0 || p.fast_warps == 0) splits = splits_for(p.fast_warps);
  if (fast_fusable_heads(l.aos(), l.format.head_dim, column_tiles, l.format.key_bits, l.num_kv_heads, dense_rotation,
                         p.tensor_copy)) {
    const std::int64_t fused = fused_heads_splits(l, has_query_start_loc, rows, p.group, column_tiles, p.fast_warps,
                                                  p.tensor_copy, max_seq_tokens, stride, splits);
    if (fused > 0) {
      splits = fused;
      p.fast_kv_heads_per_block = fast_fused_kv_heads(column_tiles, l.format.key_bits);
    }
  }
  p.plan_splits = static_cast<int>(splits);
  if (p.fast_kv_heads_per_block == 1) {
    p.pace_cluster = pace_cluster_for(l, l.num_kv_heads * p.chunks_per_kv_head, p.tensor_copy, column_tiles,
                                      p.fast_warps);
  }
  if (p.pace_cluster > 1) p.pace_tiles = pace_policy().pace_tiles;
}

}  // namespace turboquant::cuda::detail
