// How the fast decode's blocks of one split are grouped into thread-block
// clusters that keep pace (cluster_pace.cuh), for the host and the device.
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::cuda::detail {

// The AoS head pacing of the fast decode (cluster_pace.cuh), for plans of one
// KV head a block (blocks of fused heads, fast_plan.hpp, need none): the
// blocks of a split's KV heads (grid y) run as clusters of a power of two up to the limit
// (8: the portable cluster size) that divides grid y, and a warp arrives at
// the cluster barrier every kPaceTiles of its tiles.
inline constexpr int kPaceMaxCluster = 8;
inline constexpr int kPaceTiles = 1;  // measured: 1 beat 4, 16 and 64 (PERFORMANCE.md round 20)
// Pacing pays only where the heads' blocks drift apart: measured on an H100
// (25.4 GB/s of DRAM bandwidth per SM; unpaced AoS 4bit_nc read 1.35-1.64x
// SoA's DRAM bytes) it made the paced instances 0.71-0.87x as long, on an H200
// (37.2 GB/s per SM; 1.05x SoA's bytes, round 14) 1.09-1.10x as long. Devices
// below this bandwidth per SM are paced (two measured devices: a threshold
// between them, not a fitted law).
inline constexpr int kPaceMaxDramMbpsPerSm = 30000;
// The fast instances that can be paced (the others compile the pacing out):
// the AoS instances of one column tile (the single-token kernel, and the
// multi-token rows' kernel for up to 8 (row, head) columns a block: q_len 2 at
// GQA 4) whose slots share 32-byte sectors and 16-byte units with their
// neighbours' on every read: the tensor-copy ones (4bit_nc, k3v4_nc: whole
// 16-byte units, 128-byte L2 lines) and the FP8 ones (k8v4: 196-byte slots by
// cp.async; on an H100 it read 1.15x SoA's DRAM bytes, round 19). The 3-bit
// cp.async instances lost 7-10% paced, the two-tile rows instance 7% (round 20;
// 8-10% at q_len 4 in round 28);
// the one-tile rows instance took 0.79-0.89x as long paced at q_len 2 (round 28).
TQ_HD constexpr bool pace_capable(bool aos, bool one_column_tile, bool tensor_copy, bool fp8_keys) {
  return aos && one_column_tile && (tensor_copy || fp8_keys);
}

TQ_HD constexpr int pace_cluster_size(int grid_y, int limit) {
  int c = 1;
  while (2 * c <= limit && 2 * c <= kPaceMaxCluster && grid_y % (2 * c) == 0) c *= 2;
  return c;
}
static_assert(pace_cluster_size(8, 8) == 8 && pace_cluster_size(16, 8) == 8 && pace_cluster_size(12, 8) == 4 &&
              pace_cluster_size(6, 8) == 2 && pace_cluster_size(1, 8) == 1 && pace_cluster_size(8, 4) == 4 &&
              pace_cluster_size(8, 1) == 1 && pace_cluster_size(32, 16) == 8);

}  // namespace turboquant::cuda::detail
