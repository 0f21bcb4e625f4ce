// Pacing of the fast decode's blocks in a thread-block cluster.
//
// In the AoS layout a token's slots of all KV heads lie side by side, so the
// blocks of one (split, sequence), one per KV head, read interleaved pieces of
// the same token rows: a slot of 134 bytes (4bit_nc, D 128) shares its first
// and last 32-byte sectors (and, with the tensor copies' 128-byte L2
// promotion, whole lines) with its neighbours. DRAM moves each line once only
// while those blocks read a token row close together in time; left to drift,
// they did not on an H100 (PERFORMANCE.md round 19: 1.64x SoA's DRAM bytes).
// The plan launches those blocks as one cluster (DecodeParams::pace_cluster,
// grid y) and each warp paces itself: every pace_tiles of its tiles it
// arrives at the cluster barrier, and before arriving again it waits for the
// whole cluster's previous arrival. A block then runs at most about
// 2 x pace_tiles tiles per warp ahead of the slowest block of its cluster,
// which is far less than L2 holds, so the shared lines are read from DRAM once.
// Blocks of a cluster share their split and sequence (they differ in grid y
// only), so they pass through the same number of pacing rounds; warps with one
// tile less pass their last round without a tile. Which plans are paced, and
// on which devices: fast_grid.cpp's pace_cluster_for.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace turboquant::cuda::detail {

// The launch configuration of `grid` in clusters of `cluster` blocks along y
// (cluster divides grid.y), for cudaLaunchKernelEx and
// cudaOccupancyMaxActiveClusters.
struct ClusterLaunch {
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t config{};

  ClusterLaunch(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, int cluster) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = static_cast<unsigned>(cluster);
    attr.val.clusterDim.z = 1;
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // config points at attr
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
#endif
}

// One warp's pacing (all its lanes take the same steps). The host launches
// clusters only on sm_90 and newer; elsewhere `every` is 0 and nothing happens.
struct ClusterPacer {
  int every;  // tiles between arrivals; 0: the block is not paced

  // Before the warp's tile `it` (0, 1, ... in order).
  __device__ __forceinline__ void before_tile(int it) const {
    if (every == 0 || it % every != 0) return;
    if (it > 0) cluster_wait();
    cluster_arrive_relaxed();
  }
  // After the warp's last tile: the rounds up to the block's busiest warp's
  // tile count that it has no tile for.
  __device__ __forceinline__ void finish(int my_tiles, int rounds) const {
    for (int it = my_tiles; it < rounds; ++it) before_tile(it);
  }
};

}  // namespace turboquant::cuda::detail
