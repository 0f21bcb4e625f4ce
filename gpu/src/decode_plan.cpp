// The decode plan: every host check and the launch configuration once per
// layer shape (make_plan), and the per-call launch (run_plan), which decode()
// also goes through.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor_box.hpp"
#include "tensor_maps.hpp"
#include "arg_checks.hpp"
#include "cuda_check.hpp"
#include "decode_setup.hpp"
#include "launch.hpp"
#include "turboquant/core/exp2_log.hpp"
#include "turboquant/core/half.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {
namespace detail {

// decode_setup.hpp. The search runs once per codebook and thread (the last
// four codebooks are kept).
float fast_centroid_scale(const Codebook& cb) {
  struct Entry {
    Codebook codebook;
    float scale;
  };
  thread_local Entry cache[4];
  thread_local int cached = 0, next = 0;
  for (int i = 0; i < cached; ++i) {
    const Codebook& c = cache[i].codebook;
    if (c.bits == cb.bits && std::memcmp(c.centroids, cb.centroids, sizeof cb.centroids) == 0) return cache[i].scale;
  }
  float best = 1.0f;
  double best_error = INFINITY;
  for (int step = 0; step < 4096; ++step) {
    const float s = 1.0f + static_cast<float>(step) / 4096.0f;  // exact
    double worst = 0.0;
    for (int i = 0; i < cb.size(); ++i) {
      const float x = cb.centroids[i] * s;
      if (cb.centroids[i] == 0.0f) continue;
      const float rounded = core::fp16_to_float(core::float_to_fp16(x));
      worst = std::max(worst, std::fabs(double(rounded) - double(x)) / std::fabs(double(x)));
    }
    if (worst < best_error) {  // an overflow to inf is never the best
      best_error = worst;
      best = s;
    }
  }
  cache[next] = {cb, best};
  next = (next + 1) % 4;
  cached = std::min(cached + 1, 4);
  return best;
}

namespace {

// One wave of the fast grid for `column_tiles` column tiles: its units (row
// blocks x KV heads x head chunks; with query_start_loc about rows / R row
// blocks do work, the grid's others idle) and the blocks the device holds at once.
struct FastWave {
  std::int64_t units;
  std::int64_t resident;
};
FastWave fast_wave(const core::BlockLayout& l, bool has_query_start_loc, int rows, int group, int column_tiles,
                   bool tensor_copy, int warps = 0) {
  const int rows_per_block = fast_rows_per_block(has_query_start_loc, group, column_tiles);
  const int chunks = (group + kFastHeadsPerBlock - 1) / kFastHeadsPerBlock;
  const std::int64_t row_blocks = (std::int64_t{rows} + rows_per_block - 1) / rows_per_block;
  return FastWave{row_blocks * l.num_kv_heads * chunks,
                  std::int64_t{device_sm_count()} * fast_decode_occupancy(l.format, tensor_copy, column_tiles, warps)};
}

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
  const std::int64_t units = w.units / fast_fused_kv_heads(column_tiles, l.format.key_bits);
  const std::int64_t splits = std::clamp<std::int64_t>(w.resident / std::max<std::int64_t>(units, 1), 1, stride);
  const int tokens = static_cast<int>(std::min<std::int64_t>(max_seq_tokens, INT_MAX));
  const std::int64_t fused_blocks = units * plan_nonempty(true, tokens, static_cast<int>(splits));
  const std::int64_t unfused_blocks = w.units * plan_nonempty(true, tokens, static_cast<int>(unfused_splits));
  const int warps_per_head =
      (warps > 0 ? warps : fast_format_warps(l.format.key_bits)) / fast_fused_kv_heads(column_tiles, l.format.key_bits);
  if (policy == FusedPolicy::kForce) return splits;
  const bool busy = fused_blocks >= std::min(w.resident, unfused_blocks);
  return busy && fast_fused_pays_off(max_seq_tokens, splits, warps_per_head) ? splits : 0;
}

std::size_t shape_bytes(std::int64_t count, std::size_t element_bytes) {
  return static_cast<std::size_t>(count) * element_bytes;  // no overflow: check_decode_buffers passed
}

// The plan's shape: what run() compares.
void record_shape(const DecodeArgs& a, int dims, DecodePlan::Impl* out) {
  out->batch = a.batch;
  out->num_q_heads = a.num_q_heads;
  out->max_blocks_per_seq = a.max_blocks_per_seq;
  out->num_splits = a.num_splits;
  out->query_dtype = a.query_dtype;
  out->out_dtype = a.out_dtype;
  out->softmax_scale = a.softmax_scale;
  out->codebook = a.codebook;
  out->has_lse = a.lse.data != nullptr;
  out->has_rotation = a.rotation.data != nullptr;
  out->rows = static_cast<int>(decode_query_rows(a));  // <= 65535 (decode_can_implement)
  out->sliding_window = a.sliding_window;
  out->has_query_start_loc = a.query_start_loc.data != nullptr;
  out->has_sinks = a.sinks.data != nullptr;
  out->query_start_loc_bytes = out->has_query_start_loc ? shape_bytes(std::int64_t{a.batch} + 1, 4) : 0;
  out->sinks_bytes = out->has_sinks ? shape_bytes(a.num_q_heads, 4) : 0;
  const std::int64_t rows = std::int64_t{out->rows} * a.num_q_heads;
  out->query_bytes = shape_bytes(rows * dims, dtype_size(a.query_dtype));
  out->out_bytes = shape_bytes(rows * dims, dtype_size(a.out_dtype));
  out->lse_bytes = out->has_lse ? shape_bytes(rows, 4) : 0;
  out->seq_lens_bytes = shape_bytes(a.batch, 4);
  out->block_table_bytes = shape_bytes(std::int64_t{a.batch} * a.max_blocks_per_seq, 4);
}

Status mismatch(const char* field, long long plan, long long call) {
  return invalid_argument(std::string("decode plan: the call's ") + field + " = " + std::to_string(call) +
                          " differs from the plan's " + std::to_string(plan) + " (make one plan per shape)");
}

Status too_small(const char* field, std::size_t bytes, std::size_t needed) {
  return Status(StatusCode::kBufferTooSmall, std::string("decode plan: ") + field + " has " + std::to_string(bytes) +
                                                 " bytes but the plan's shape needs " + std::to_string(needed));
}

Status match_shape(const DecodePlan::Impl& p, const DecodeArgs& a, MutableBuffer workspace) {
  if (a.batch != p.batch) return mismatch("batch", p.batch, a.batch);
  if (a.num_q_heads != p.num_q_heads) return mismatch("num_q_heads", p.num_q_heads, a.num_q_heads);
  if (a.max_blocks_per_seq != p.max_blocks_per_seq) {
    return mismatch("max_blocks_per_seq", p.max_blocks_per_seq, a.max_blocks_per_seq);
  }
  if (a.num_splits != p.num_splits) return mismatch("num_splits", p.num_splits, a.num_splits);
  if (a.query_dtype != p.query_dtype) return invalid_argument("decode plan: the call's query_dtype differs from the plan's");
  if (a.out_dtype != p.out_dtype) return invalid_argument("decode plan: the call's out_dtype differs from the plan's");
  if (std::memcmp(&a.softmax_scale, &p.softmax_scale, sizeof(float)) != 0) {
    return invalid_argument("decode plan: the call's softmax_scale = " + std::to_string(a.softmax_scale) +
                            " differs from the plan's " + std::to_string(p.softmax_scale));
  }
  if (a.codebook != p.codebook) return invalid_argument("decode plan: the call's codebook differs from the plan's");
  if ((a.lse.data != nullptr) != p.has_lse) return invalid_argument("decode plan: lse is given in only one of the call and the plan");
  if ((a.rotation.data != nullptr) != p.has_rotation) {
    return invalid_argument("decode plan: rotation is given in only one of the call and the plan");
  }
  if ((a.query_start_loc.data != nullptr) != p.has_query_start_loc) {
    return invalid_argument("decode plan: query_start_loc is given in only one of the call and the plan");
  }
  if ((a.sinks.data != nullptr) != p.has_sinks) {
    return invalid_argument("decode plan: sinks are given in only one of the call and the plan");
  }
  if (a.sliding_window != p.sliding_window) return mismatch("sliding_window", p.sliding_window, a.sliding_window);
  if (decode_query_rows(a) != p.rows) return mismatch("query rows", p.rows, decode_query_rows(a));
  if (p.rows == 0) return Status();
  const struct {
    const char* name;
    const void* data;
    std::size_t bytes, needed;
  } buffers[] = {{"query", a.query.data, a.query.bytes, p.query_bytes},
                 {"out", a.out.data, a.out.bytes, p.out_bytes},
                 {"lse", a.lse.data, a.lse.bytes, p.lse_bytes},
                 {"seq_lens", a.seq_lens.data, a.seq_lens.bytes, p.seq_lens_bytes},
                 {"block_table", a.block_table.data, a.block_table.bytes, p.block_table_bytes},
                 {"query_start_loc", a.query_start_loc.data, a.query_start_loc.bytes, p.query_start_loc_bytes},
                 {"sinks", a.sinks.data, a.sinks.bytes, p.sinks_bytes},
                 {"workspace", workspace.data, workspace.bytes, p.workspace_total}};
  for (const auto& b : buffers) {
    if (b.needed != 0 && (b.data == nullptr || b.bytes < b.needed)) return too_small(b.name, b.bytes, b.needed);
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data) % kWorkspaceAlign != 0) {
    return invalid_argument("workspace must be 256-byte aligned");
  }
  return Status();
}

}  // namespace

Status make_plan(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode, MutableBuffer workspace,
                 DecodePlan::Impl* out) {
  if (Status s = decode_can_implement(cache, a, mode); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  record_shape(a, dims, out);
  const int rows = out->rows;  // the workspace's and the grids' row count (query rows)
  if (rows == 0) return Status();
  if (Status s = check_device_pointers({{"cache.data", cache.data},
                                        {"query", a.query.data},
                                        {"out", a.out.data},
                                        {"lse", a.lse.data},
                                        {"seq_lens", a.seq_lens.data},
                                        {"block_table", a.block_table.data},
                                        {"rotation", a.rotation.data},
                                        {"query_start_loc", a.query_start_loc.data},
                                        {"sinks", a.sinks.data},
                                        {"workspace", workspace.data}});
      !s.ok())
    return s;
  // The partial stride: as many splits as the workspace holds (up to what fast
  // mode may use), at least num_splits.
  int stride = a.num_splits;
  const int capacity = fast_split_capacity(rows, a.num_splits);
  while (stride < capacity && workspace_layout(rows, a.num_q_heads, stride + 1, dims).total <= workspace.bytes) ++stride;
  const WorkspaceLayout w = workspace_layout(rows, a.num_q_heads, stride, dims);
  if (w.total == kOverflow) {
    return Status(StatusCode::kOutOfRange, "the workspace of " + std::to_string(rows) + " query rows x num_q_heads " +
                                               std::to_string(a.num_q_heads) + " x " + std::to_string(stride) +
                                               " splits x head_dim " + std::to_string(dims) + " exceeds 2^64 bytes");
  }
  if (Status s = check_bytes("workspace", workspace.data, workspace.bytes, w.total,
                             "decode_workspace_bytes(" + std::to_string(rows) + ", " +
                                 std::to_string(a.num_q_heads) + ", " + std::to_string(a.num_splits) + ", " +
                                 std::to_string(dims) + ")");
      !s.ok())
    return s;
  if (reinterpret_cast<std::uintptr_t>(workspace.data) % kWorkspaceAlign != 0) {
    return invalid_argument("workspace must be 256-byte aligned");
  }
  out->fast = uses_fast_kernel(cache, a, mode);
  out->ml_offset = w.ml_offset;
  out->workspace_total = w.total;
  const Codebook* cb = nullptr;
  (void)turboquant::detail::resolve_codebook(l.format, a.codebook, &cb);  // checked above

  DecodeParams& p = out->params;
  p.layout = l;
  p.block_size_div = FastDivisor(static_cast<std::uint32_t>(l.block_size));
  p.cache = cache.data;
  p.num_blocks = cache.num_blocks;
  const bool dense_rotation = a.rotation.data != nullptr && !l.format.fp8_keys();
  const int group = a.num_q_heads / l.num_kv_heads;
  int column_tiles = out->fast ? fast_column_tiles(out->has_query_start_loc, group, rows, a.batch, l.format.head_dim,
                                                   dense_rotation)
                               : 1;
  const WidePolicy wide = wide_policy();
  if (column_tiles == kFastWideColumnTiles && wide != WidePolicy::kForce) {
    // The cp.async instance's occupancy (the tensor-copy one's: the same two blocks, wide_tiles.cuh).
    const FastWave w = fast_wave(l, true, rows, group, column_tiles, false);
    const std::int64_t max_seq_tokens = std::int64_t{a.max_blocks_per_seq} * l.block_size;
    if (wide == WidePolicy::kOff || !wide_pays_off(w.units, w.resident, max_seq_tokens)) column_tiles = 2;
  }
  // Tiles by tensor copies: the wide kernel's as its loader policy says
  // (decode_setup.hpp), the other fast kernels' where they paid (tensor_box.hpp).
  const bool boxes =
      column_tiles == kFastWideColumnTiles ? wide_takes_tensor_copies(l, wide_loader()) : tensor_copy_fits(l);
  if (out->fast && boxes && device_has_tensor_copies() && tensor_copies_enabled()) {
    p.tensor_copy = encode_tensor_maps(l, cache.data, cache.num_blocks, &out->maps);
  }
  p.query_dtype = a.query_dtype;
  p.out_dtype = a.out_dtype;
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.batch = a.batch;
  p.rows = rows;
  p.sliding_window = a.sliding_window;
  p.num_q_heads = a.num_q_heads;
  p.group = group;
  p.heads_per_block = heads_per_block(out->fast, p.group);
  p.chunks_per_kv_head = (p.group + p.heads_per_block - 1) / p.heads_per_block;
  p.fast_column_tiles = column_tiles;
  p.fast_rows_per_block = out->fast ? fast_rows_per_block(out->has_query_start_loc, p.group, p.fast_column_tiles) : 1;
  p.num_splits = stride;
  p.plan_splits = a.num_splits;
  if (out->fast) {
    // About one wave of blocks at full occupancy: fewer, longer splits for
    // large batches, more splits (up to the workspace's stride) for small.
    // Two column tiles take twelve-warp blocks where their splits of the
    // longest sequence the block table holds are long (fast_deep_pays_off).
    const std::int64_t max_seq_tokens = std::int64_t{a.max_blocks_per_seq} * l.block_size;
    auto splits_for = [&](int warps) -> std::int64_t {
      const FastWave w = fast_wave(l, out->has_query_start_loc, rows, group, column_tiles, p.tensor_copy, warps);
      if (w.resident <= 0) return a.num_splits;
      return std::clamp<std::int64_t>(w.resident / std::max<std::int64_t>(w.units, 1), 1, stride);
    };
    std::int64_t splits = 0;
    if (column_tiles == 2) {
      splits = splits_for(kFastDeepWarps);
      if (fast_deep_pays_off(max_seq_tokens, splits)) p.fast_warps = kFastDeepWarps;
    }
    if (p.fast_warps == 0) splits = splits_for(0);
    if (fast_fusable_heads(l.aos(), l.format.head_dim, column_tiles, l.format.key_bits, l.num_kv_heads,
                           dense_rotation, p.tensor_copy)) {
      const std::int64_t fused = fused_heads_splits(l, out->has_query_start_loc, rows, group, column_tiles,
                                                    p.fast_warps, p.tensor_copy, max_seq_tokens, stride, splits);
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
  p.query_factor = core::mul_rn(a.softmax_scale, core::kLog2e);
  p.codebook = *cb;
  if (out->fast && !l.format.fp8_keys()) {  // params.hpp: the pair table's scaled centroids
    const float s = fast_centroid_scale(*cb);
    const float unscale = 1.0f / s;
    for (int i = 0; i < p.codebook.size(); ++i) p.codebook.centroids[i] *= s;
    p.query_factor = core::mul_rn(p.query_factor, unscale);
    p.fast_squares_unscale = unscale * unscale;
  }
  return Status();
}

Status run_plan(const DecodePlan::Impl& plan, const DecodeArgs& a, MutableBuffer workspace, cudaStream_t stream) {
  if (plan.rows == 0) return Status();
  DecodeParams p = plan.params;
  p.query_start_loc = static_cast<const std::int32_t*>(a.query_start_loc.data);
  p.sinks = static_cast<const float*>(a.sinks.data);
  p.query = a.query.data;
  p.seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  p.block_table = static_cast<const std::int32_t*>(a.block_table.data);
  p.rotation = static_cast<const float*>(a.rotation.data);
  p.out = a.out.data;
  p.lse = static_cast<float*>(a.lse.data);
  p.partial_acc = static_cast<float*>(workspace.data);
  p.partial_ml = reinterpret_cast<float*>(static_cast<char*>(workspace.data) + plan.ml_offset);
  if (Status s = launch_decode(p, plan.fast, plan.maps, stream); !s.ok()) return s;
  TQ_CUDA_TRY(launch_merge(p, plan.fast, stream));
  return Status();
}

}  // namespace detail

const char* DecodePlan::kernel_name() const {
  if (impl_ == nullptr) return "";
  return impl_->fast ? "cuda:fast" : "cuda:strict";
}
int DecodePlan::splits() const { return impl_ == nullptr ? 0 : impl_->params.plan_splits; }
std::size_t DecodePlan::workspace_bytes() const { return impl_ == nullptr ? 0 : impl_->workspace_total; }

Status make_decode_plan(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode, MutableBuffer workspace,
                        DecodePlan* plan) {
  plan->impl_.reset();
  auto impl = std::make_shared<DecodePlan::Impl>();
  if (Status s = detail::make_plan(cache, args, mode, workspace, impl.get()); !s.ok()) return s;
  plan->impl_ = std::move(impl);
  return Status();
}

Status run(const DecodePlan& plan, const DecodeArgs& args, MutableBuffer workspace, void* stream) {
  if (plan.impl_ == nullptr) return detail::invalid_argument("decode plan: empty (make it with make_decode_plan)");
  if (Status s = detail::match_shape(*plan.impl_, args, workspace); !s.ok()) return s;
  return detail::run_plan(*plan.impl_, args, workspace, static_cast<cudaStream_t>(stream));
}

}  // namespace turboquant::cuda
