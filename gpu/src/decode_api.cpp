// Decode entry points: host-side checks, workspace layout, kernel selection.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "arg_checks.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"
#include "turboquant/core/exp2_log.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {
namespace {

using turboquant::detail::check_buffer;
using detail::invalid_argument;

constexpr std::size_t kWorkspaceAlign = 256;
constexpr int kMaxGridYZ = 65535;

std::size_t align_up(std::size_t x) { return (x + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// Fast mode may cut a sequence into more splits than num_splits when the batch
// is small (more blocks in flight); the workspace is sized for this many.
constexpr int kFastMaxSplits = 256;
constexpr int kFastSplitBudget = 2048;  // partials per query head, summed over the batch
int fast_split_capacity(int batch, int num_splits) {
  const int extra = std::min(kFastMaxSplits, kFastSplitBudget / std::max(batch, 1));
  return std::max(num_splits, extra);
}

struct WorkspaceLayout {
  std::size_t ml_offset = 0;  // partial (max, sum) after the accumulators
  std::size_t total = 0;
};

constexpr std::size_t kOverflow = std::numeric_limits<std::size_t>::max();

// total = kOverflow when the sizes do not fit in size_t.
WorkspaceLayout workspace_layout(int batch, int num_q_heads, int num_splits, int head_dim) {
  std::size_t partials = 0, acc_bytes = 0, ml_bytes = 0;
  WorkspaceLayout w;
  if (__builtin_mul_overflow(std::size_t(batch), std::size_t(num_q_heads), &partials) ||
      __builtin_mul_overflow(partials, std::size_t(num_splits), &partials) ||
      __builtin_mul_overflow(partials, std::size_t(head_dim) * sizeof(float), &acc_bytes) ||
      __builtin_mul_overflow(partials, 2 * sizeof(float), &ml_bytes) || acc_bytes > kOverflow / 2 ||
      ml_bytes > kOverflow / 2) {
    w.total = kOverflow;
    return w;
  }
  w.ml_offset = align_up(acc_bytes);
  w.total = w.ml_offset + align_up(ml_bytes);
  return w;
}

int heads_per_block(bool fast, int group) {
  return fast ? detail::kFastHeadsPerBlock : detail::strict_heads_per_block(group);
}

bool uses_fast_kernel(const ConstCacheView& cache, CudaMode mode) {
  const Format& f = cache.layout.format;
  // The fast kernel's tiles stay inside one block (block_size % 16), its copies
  // are 16-byte aligned, and its in-block offsets are 32-bit.
  return mode == CudaMode::kFast && detail::fast_decode_supported(f.head_dim, f.key_bits, f.value_bits) &&
         cache.layout.block_size % 16 == 0 && reinterpret_cast<std::uintptr_t>(cache.data) % 16 == 0 &&
         cache.layout.block_bytes() <= std::numeric_limits<std::int32_t>::max();
}

}  // namespace

std::size_t decode_workspace_bytes(int max_batch, int num_q_heads, int num_splits, int head_dim) {
  if (max_batch <= 0 || num_q_heads <= 0 || num_splits <= 0 || head_dim <= 0) return 0;
  const std::size_t total = workspace_layout(max_batch, num_q_heads, fast_split_capacity(max_batch, num_splits), head_dim).total;
  return total == kOverflow ? 0 : total;
}

Status decode_can_implement(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode) {
  if (Status s = turboquant::detail::validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  if (!detail::decode_head_dim_supported(dims)) {
    return Status(StatusCode::kUnsupported, "head_dim = " + std::to_string(dims) + ": the CUDA decode supports 64, 128 and 256");
  }
  if (a.batch < 0 || a.batch > kMaxGridYZ) {
    return invalid_argument("batch = " + std::to_string(a.batch) + ": must be in [0, 65535]");
  }
  if (a.num_q_heads < 1) return invalid_argument("num_q_heads = " + std::to_string(a.num_q_heads) + ": must be >= 1");
  if (a.num_q_heads % l.num_kv_heads != 0) {
    return invalid_argument("num_q_heads = " + std::to_string(a.num_q_heads) +
                            " is not a multiple of num_kv_heads = " + std::to_string(l.num_kv_heads));
  }
  if (a.max_blocks_per_seq < 0) {
    return invalid_argument("max_blocks_per_seq = " + std::to_string(a.max_blocks_per_seq) + ": must be >= 0");
  }
  if (!std::isfinite(a.softmax_scale)) {
    return Status(StatusCode::kNonFinite, "softmax_scale = " + std::to_string(a.softmax_scale) + " is not finite");
  }
  if (a.num_splits < 1 || a.num_splits > 1024) {
    return invalid_argument("num_splits = " + std::to_string(a.num_splits) + ": must be in [1, 1024]");
  }
  const int group = a.num_q_heads / l.num_kv_heads;
  const int hpb = heads_per_block(uses_fast_kernel(cache, mode), group);
  const int chunks = (group + hpb - 1) / hpb;
  if (std::int64_t{l.num_kv_heads} * chunks > kMaxGridYZ) {
    return Status(StatusCode::kUnsupported, "num_kv_heads x head chunks exceeds the grid limit 65535");
  }
  if (Status s = check_buffer("query", a.query.data, a.query.bytes,
                              {{a.batch, a.num_q_heads, dims}, dtype_size(a.query_dtype), dtype_name(a.query_dtype)});
      !s.ok())
    return s;
  if (Status s = check_buffer("out", a.out.data, a.out.bytes,
                              {{a.batch, a.num_q_heads, dims}, dtype_size(a.out_dtype), dtype_name(a.out_dtype)});
      !s.ok())
    return s;
  if (a.lse.data != nullptr || a.lse.bytes != 0) {
    if (Status s = check_buffer("lse", a.lse.data, a.lse.bytes, {{a.batch, a.num_q_heads}, 4, "float32"}); !s.ok()) {
      return s;
    }
  }
  if (Status s = check_buffer("seq_lens", a.seq_lens.data, a.seq_lens.bytes, {{a.batch}, 4, "int32"}); !s.ok()) {
    return s;
  }
  if (Status s = check_buffer("block_table", a.block_table.data, a.block_table.bytes,
                              {{a.batch, a.max_blocks_per_seq}, 4, "int32"});
      !s.ok())
    return s;
  const Codebook* cb = nullptr;
  if (Status s = turboquant::detail::resolve_codebook(l.format, a.codebook, &cb); !s.ok()) return s;
  if (a.rotation.data != nullptr || a.rotation.bytes != 0) {
    if (l.format.fp8_keys()) return invalid_argument("rotation given, but FP8 keys are not rotated");
    if (Status s = check_buffer("rotation", a.rotation.data, a.rotation.bytes, {{dims, dims}, 4, "float32"});
        !s.ok())
      return s;
  }
  return Status();
}

const char* decode_kernel_name(const ConstCacheView& cache, const DecodeArgs&, CudaMode mode) {
  return uses_fast_kernel(cache, mode) ? "cuda:fast" : "cuda:strict";
}

Status decode(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode, MutableBuffer workspace, void* stream) {
  if (Status s = decode_can_implement(cache, a, mode); !s.ok()) return s;
  if (a.batch == 0) return Status();
  if (Status s = detail::check_device_pointers({{"cache.data", cache.data},
                                                {"query", a.query.data},
                                                {"out", a.out.data},
                                                {"lse", a.lse.data},
                                                {"seq_lens", a.seq_lens.data},
                                                {"block_table", a.block_table.data},
                                                {"rotation", a.rotation.data},
                                                {"workspace", workspace.data}});
      !s.ok())
    return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  // The partial stride: as many splits as the workspace holds (up to what fast
  // mode may use), at least num_splits.
  int stride = a.num_splits;
  const int capacity = fast_split_capacity(a.batch, a.num_splits);
  while (stride < capacity && workspace_layout(a.batch, a.num_q_heads, stride + 1, dims).total <= workspace.bytes) ++stride;
  const WorkspaceLayout w = workspace_layout(a.batch, a.num_q_heads, stride, dims);
  if (w.total == kOverflow) {
    return Status(StatusCode::kOutOfRange, "the workspace of batch " + std::to_string(a.batch) + " x num_q_heads " +
                                               std::to_string(a.num_q_heads) + " x " + std::to_string(stride) +
                                               " splits x head_dim " + std::to_string(dims) + " exceeds 2^64 bytes");
  }
  if (Status s = detail::check_bytes("workspace", workspace.data, workspace.bytes, w.total,
                              "decode_workspace_bytes(" + std::to_string(a.batch) + ", " +
                                  std::to_string(a.num_q_heads) + ", " + std::to_string(a.num_splits) + ", " +
                                  std::to_string(dims) + ")");
      !s.ok())
    return s;
  if (reinterpret_cast<std::uintptr_t>(workspace.data) % kWorkspaceAlign != 0) {
    return invalid_argument("workspace must be 256-byte aligned");
  }
  const bool fast = uses_fast_kernel(cache, mode);
  const Codebook* cb = nullptr;
  (void)turboquant::detail::resolve_codebook(l.format, a.codebook, &cb);  // checked above

  detail::DecodeParams p;
  p.layout = l;
  p.cache = cache.data;
  p.num_blocks = cache.num_blocks;
  p.query = a.query.data;
  p.query_dtype = a.query_dtype;
  p.block_table = static_cast<const std::int32_t*>(a.block_table.data);
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  p.batch = a.batch;
  p.num_q_heads = a.num_q_heads;
  p.group = a.num_q_heads / l.num_kv_heads;
  p.heads_per_block = heads_per_block(fast, p.group);
  p.chunks_per_kv_head = (p.group + p.heads_per_block - 1) / p.heads_per_block;
  p.num_splits = stride;
  p.plan_splits = a.num_splits;
  if (fast) {
    // About one wave of blocks at full occupancy: fewer, longer splits for
    // large batches, more splits (up to the workspace's stride) for small.
    const int units = a.batch * l.num_kv_heads * p.chunks_per_kv_head;
    const int resident = detail::device_sm_count() *
                         detail::fast_decode_occupancy(dims, l.format.key_bits, l.format.value_bits);
    if (resident > 0) p.plan_splits = std::clamp(resident / std::max(units, 1), 1, stride);
  }
  p.query_factor = core::mul_rn(a.softmax_scale, core::kLog2e);
  p.rotation = static_cast<const float*>(a.rotation.data);
  p.codebook = *cb;
  p.partial_acc = static_cast<float*>(workspace.data);
  p.partial_ml = reinterpret_cast<float*>(static_cast<char*>(workspace.data) + w.ml_offset);
  p.out = a.out.data;
  p.out_dtype = a.out_dtype;
  p.lse = static_cast<float*>(a.lse.data);

  const auto s = static_cast<cudaStream_t>(stream);
  TQ_CUDA_TRY(fast ? detail::launch_fast_decode(p, s) : detail::launch_strict_decode(p, s));
  TQ_CUDA_TRY(detail::launch_merge(p, fast, s));
  return Status();
}

}  // namespace turboquant::cuda
