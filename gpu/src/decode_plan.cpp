// The decode plan: every host check and the launch configuration once per
// layer shape (make_plan), and the per-call launch (run_plan), which decode()
// also goes through.
#include <algorithm>
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
    plan_fast_grid(l, out->has_query_start_loc, rows, dense_rotation, std::int64_t{a.max_blocks_per_seq} * l.block_size,
                   a.num_splits, p);
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
