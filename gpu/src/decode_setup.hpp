// The decode's host-side setup, shared by decode_can_implement, the plan and
// decode(): the workspace layout, the kernel choice and the plan internals.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "fast_plan.hpp"
#include "params.hpp"
#include "tensor_box.hpp"
#include "tensor_maps.hpp"
#include "turboquant/core/partial_layout.hpp"
#include "turboquant/cuda.hpp"

namespace turboquant::cuda::detail {

inline constexpr std::size_t kWorkspaceAlign = core::PartialLayout::kRegionAlign;  // the workspace base, as its regions
inline constexpr int kMaxGridYZ = 65535;
inline constexpr std::size_t kOverflow = std::numeric_limits<std::size_t>::max();

// The fast kernel's centroid scale s (params.hpp): the factor in [1, 2), in
// steps of 1/4096, whose products s * c with the codebook's nonzero centroids
// have the smallest worst relative error when rounded to fp16 (ties: the
// smallest s). The scores (s c) . (q / s) then carry a fraction of the fp16
// rounding of c itself: on the sharp vLLM case a05 that rounding was most of
// the fast decode's 1.17e-3 error (docs/RELIABILITY.md F11).
float fast_centroid_scale(const Codebook& cb);

// One wave of the fast grid for `column_tiles` column tiles: its units (row
// blocks x KV heads x head chunks; with query_start_loc about rows / R row
// blocks do work, the grid's others idle) and the blocks the device holds at
// once (warps: as DecodeParams::fast_warps). fast_grid.cpp.
struct FastWave {
  std::int64_t units;
  std::int64_t resident;
};
FastWave fast_wave(const core::BlockLayout& l, bool has_query_start_loc, int rows, int group, int column_tiles,
                   bool tensor_copy, int warps = 0);

// The fast decode's grid for p (its layout, group, column tiles, tensor
// copies, head chunks and workspace stride p.num_splits already set): sets
// p.fast_warps, p.plan_splits, p.fast_kv_heads_per_block, p.pace_cluster and
// p.pace_tiles. num_splits: the caller's, taken where the device's occupancy
// is unknown. fast_grid.cpp.
void plan_fast_grid(const core::BlockLayout& l, bool has_query_start_loc, int rows, bool dense_rotation,
                    std::int64_t max_seq_tokens, int num_splits, DecodeParams& p);


// Fast mode may cut a sequence into more splits than num_splits when the batch
// is small (more blocks in flight); the workspace is sized for this many.
inline constexpr int kFastMaxSplits = 256;
inline constexpr int kFastSplitBudget = 2048;  // partials per query head, summed over the batch
inline int fast_split_capacity(int batch, int num_splits) {
  const int extra = std::min(kFastMaxSplits, kFastSplitBudget / std::max(batch, 1));
  return std::max(num_splits, extra);
}

struct WorkspaceLayout {
  std::size_t ml_offset = 0;  // partial (max, sum) after the accumulators
  std::size_t total = 0;      // kOverflow when the sizes do not fit in size_t
};
WorkspaceLayout workspace_layout(int batch, int num_q_heads, int num_splits, int head_dim);

// Whether the fast plan takes the wide kernel where fast_column_tiles picks it:
// kAuto where its blocks get long splits (wide_pays_off), kOff never
// (two column tiles instead), kForce always. TQ_FAST_WIDE=off or =force sets
// the process's policy at its first plan (the benchmarks' A/B in one binary);
// the tests set it with set_wide_policy. It picks the kernel, never what a
// call computes beyond the fast mode's bound.
enum class WidePolicy { kAuto, kOff, kForce };
WidePolicy wide_policy();
void set_wide_policy(WidePolicy policy);

// Whether the fast plan takes blocks of fused heads (fast_plan.hpp's
// fast_fusable_heads) for AoS caches: kAuto where their grid fills the device
// as the unfused one does (fast_grid.cpp), kOff never (one KV head a block,
// paced where the pacing's rule says), kForce wherever they can run.
// TQ_FAST_FUSED=off or =force sets the process's policy at its first plan (the
// benchmarks' A/B); the tests set it with set_fused_policy. It picks the
// kernel, never what a call computes beyond the fast mode's bound.
enum class FusedPolicy { kAuto, kOff, kForce };
FusedPolicy fused_policy();
void set_fused_policy(FusedPolicy policy);

// The AoS head pacing of the decode plans (cluster_pace.cuh): clusters of at
// most max_cluster blocks (1: none), pace_tiles tiles between a warp's
// arrivals; force: the fast plan takes max_cluster (where it divides grid y)
// even on a device of much DRAM bandwidth per SM or where the device holds
// fewer blocks in clusters of that size.
// TQ_FAST_CLUSTER=<n>, TQ_FAST_PACE=<n> and TQ_FAST_CLUSTER_FORCE=1 set the
// process's policy at its first plan (the benchmarks' A/B); the tests set it
// with set_pace_policy. It changes when blocks run, never what a call computes.
struct PacePolicy {
  int max_cluster = kPaceMaxCluster;
  int pace_tiles = kPaceTiles;
  bool force = false;
};
PacePolicy pace_policy();
void set_pace_policy(PacePolicy policy);

// Whether strict decodes of AoS caches whose rows all share one row shift
// (uniform_row_shift) take the instances built for that (one shift per warp)
// rather than the per-row ones. TQ_STRICT_SHIFT=per-row sets the process's
// policy to the per-row instances at its first launch (the benchmarks' A/B);
// the tests set it with set_strict_uniform_shift. Both compute the same bits.
bool strict_uniform_shift();
void set_strict_uniform_shift(bool allowed);

// Which loader the wide kernel takes where wide_tensor_copy_fits
// (tensor_box.hpp) and TQ_FAST_LOADER allows tensor copies: kAuto takes them
// for AoS caches (on an H100, 16 x 32768 and 8 x 8192 at q_len 16 and 128,
// 4bit_nc: 0.93-0.95x cp.async's time) and cp.async for SoA (tensor copies
// 1.04-1.06x there; PERFORMANCE.md round 26). TQ_WIDE_LOADER=tensor or
// =cp.async sets the process's policy at its first plan (the benchmarks'
// A/B); the tests set it with set_wide_loader. Both loaders stage the same
// bytes, so the decode computes the same bits.
enum class WideLoader { kAuto, kCpAsync, kTensor };
WideLoader wide_loader();
void set_wide_loader(WideLoader loader);
// Which wide kernel the fast plan takes where it takes one: kClassic the
// four-warp blocks of wide_decode.cuh (every warp loads, dequantizes and
// computes), kSpecialized the blocks of four warpgroups in roles
// (wide_specialized.cuh: two dequantize, two compute; sm_90 and newer).
// kAuto takes the specialized blocks wherever the device has them: on an
// H100, 0.82-0.95x the classic time at q_len 16 and 128 for every preset and
// both layouts (PERFORMANCE.md round 33). TQ_WIDE_KERNEL=classic or
// =specialized sets the process's policy at its first plan (the benchmarks'
// A/B); the tests set it with set_wide_kernel. The two sum a split's tokens in
// different orders, both within the fast mode's bound.
enum class WideKernel { kAuto, kClassic, kSpecialized };
WideKernel wide_kernel();
void set_wide_kernel(WideKernel kernel);
// Whether a plan's wide kernel is the specialized one on the current device.
bool wide_kernel_specialized();
// Whether the wide kernel of layout l takes tensor copies under `loader` (the
// device and TQ_FAST_LOADER permitting).
inline bool wide_takes_tensor_copies(const core::BlockLayout& l, WideLoader loader) {
  return wide_tensor_copy_fits(l) && (loader == WideLoader::kTensor || (loader == WideLoader::kAuto && l.aos()));
}

inline int heads_per_block(bool fast, int group) { return fast ? kFastHeadsPerBlock : strict_heads_per_block(group); }

// Whether a decode of this cache in this mode runs the fast kernel.
bool uses_fast_kernel(const ConstCacheView& cache, CudaMode mode);
// The same for these arguments: multi-token rows take the fast kernel while
// its grid's row blocks fit in z (fast_row_blocks), else the strict kernels.
inline bool uses_fast_kernel(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode) {
  const bool has_qsl = a.query_start_loc.data != nullptr;
  const int group = cache.layout.num_kv_heads > 0 ? a.num_q_heads / cache.layout.num_kv_heads : 1;
  const std::int64_t rows = decode_query_rows(a);
  return uses_fast_kernel(cache, mode) && rows <= kMaxGridYZ &&
         fast_row_blocks(has_qsl, static_cast<int>(rows), a.batch, fast_rows_per_block(has_qsl, group)) <= kMaxGridYZ;
}

}  // namespace turboquant::cuda::detail

namespace turboquant::cuda {

// What a plan fixes (decode_plan.cpp): the kernel parameters with the plan's
// pointers (run() puts the call's in), and the shape a call must match.
struct DecodePlan::Impl {
  detail::DecodeParams params;
  detail::FastTensorMaps maps{};  // params.tensor_copy: the cache's tensor maps (tensor_maps.hpp)
  bool fast = false;
  std::size_t ml_offset = 0;        // workspace offset of the partial (max, sum)
  std::size_t workspace_total = 0;  // bytes of workspace the launch uses
  // The call's shape, as the plan was made for it.
  int batch = 0, num_q_heads = 0, max_blocks_per_seq = 0, num_splits = 0;
  int rows = 0, sliding_window = 0;  // rows: decode_query_rows
  bool has_query_start_loc = false, has_sinks = false;
  DType query_dtype = DType::kFloat32, out_dtype = DType::kFloat32;
  float softmax_scale = 0.0f;
  const Codebook* codebook = nullptr;
  bool has_lse = false, has_rotation = false;
  // Bytes each buffer must hold.
  std::size_t query_bytes = 0, out_bytes = 0, lse_bytes = 0, seq_lens_bytes = 0, block_table_bytes = 0;
  std::size_t query_start_loc_bytes = 0, sinks_bytes = 0;
};

namespace detail {
// All host checks, pointer queries and the launch configuration of a decode
// (decode_can_implement first).
Status make_plan(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode, MutableBuffer workspace,
                 DecodePlan::Impl* out);
// The launch of a plan with the call's pointers (after the shape match).
Status run_plan(const DecodePlan::Impl& plan, const DecodeArgs& args, MutableBuffer workspace, cudaStream_t stream);
}  // namespace detail

}  // namespace turboquant::cuda
