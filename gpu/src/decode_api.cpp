// Decode entry points: host-side checks, workspace layout, kernel selection
// (the launch itself is the plan's, decode_plan.cpp).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "arg_checks.hpp"
#include "decode_setup.hpp"
#include "launch.hpp"
#include "turboquant/core/partial_layout.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {
namespace detail {

WorkspaceLayout workspace_layout(int batch, int num_q_heads, int num_splits, int head_dim) {
  WorkspaceLayout w;
  // Rows are (sequence, query head); the kernels index the same layout.
  const core::PartialLayout partials{head_dim, num_splits, std::int64_t{batch} * num_q_heads};
  const std::int64_t total = partials.total_bytes();
  if (batch < 0 || num_q_heads < 0 || num_splits < 0 || head_dim < 0 || total < 0) {
    w.total = kOverflow;
    return w;
  }
  w.ml_offset = static_cast<std::size_t>(partials.ml_region_offset());
  w.total = static_cast<std::size_t>(total);
  return w;
}

bool uses_fast_kernel(const ConstCacheView& cache, CudaMode mode) {
  const Format& f = cache.layout.format;
  // The fast kernel's tiles stay inside one block (block_size % 16), its copies
  // are 16-byte aligned, and its in-block offsets are 32-bit. AoS: the slots of
  // a head share their 4-byte phase (a token stride that is a multiple of 4,
  // i.e. an even num_kv_heads or slots of a multiple of 4 bytes).
  return mode == CudaMode::kFast && fast_decode_supported(f.head_dim, f.key_bits, f.value_bits) &&
         cache.layout.block_size % 16 == 0 && reinterpret_cast<std::uintptr_t>(cache.data) % 16 == 0 &&
         cache.layout.block_bytes() <= std::numeric_limits<std::int32_t>::max() &&
         (!f.aos() || cache.layout.token_stride() % 4 == 0);
}

}  // namespace detail

using detail::invalid_argument;
using detail::kMaxGridYZ;

std::size_t decode_workspace_bytes(int max_batch, int num_q_heads, int num_splits, int head_dim) {
  if (max_batch <= 0 || num_q_heads <= 0 || num_splits <= 0 || head_dim <= 0) return 0;
  const std::size_t total =
      detail::workspace_layout(max_batch, num_q_heads, detail::fast_split_capacity(max_batch, num_splits), head_dim).total;
  return total == detail::kOverflow ? 0 : total;
}

Status decode_can_implement(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode) {
  if (Status s = turboquant::detail::validate_cache(cache); !s.ok()) return s;
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  if (Status s = detail::check_head_dim(dims, "decode"); !s.ok()) return s;
  if (a.batch < 0 || a.batch > kMaxGridYZ) {
    return invalid_argument("batch = " + std::to_string(a.batch) + ": must be in [0, 65535]");
  }
  if (Status s = turboquant::detail::check_decode_scalars(l, a); !s.ok()) return s;
  const int group = a.num_q_heads / l.num_kv_heads;
  const std::int64_t rows = decode_query_rows(a);
  if (rows > kMaxGridYZ) {
    return invalid_argument("query rows = " + std::to_string(rows) + ": must be <= 65535 (the grid's row dimension)");
  }
  const int hpb = detail::heads_per_block(detail::uses_fast_kernel(cache, a, mode), group);
  const int chunks = (group + hpb - 1) / hpb;
  if (std::int64_t{l.num_kv_heads} * chunks > kMaxGridYZ) {
    return Status(StatusCode::kUnsupported, "num_kv_heads x head chunks exceeds the grid limit 65535");
  }
  // Multi-token rows, sinks and windows run the strict kernels (uses_fast_kernel).
  return turboquant::detail::check_decode_buffers(l, a);
}

const char* decode_kernel_name(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode) {
  return detail::uses_fast_kernel(cache, a, mode) ? "cuda:fast" : "cuda:strict";
}

Status decode(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode, MutableBuffer workspace, void* stream) {
  // The plan of this one call (on the stack: no allocation), then its launch.
  DecodePlan::Impl plan;
  if (Status s = detail::make_plan(cache, a, mode, workspace, &plan); !s.ok()) return s;
  return detail::run_plan(plan, a, workspace, static_cast<cudaStream_t>(stream));
}

}  // namespace turboquant::cuda
