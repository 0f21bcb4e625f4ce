// decode_cpu: validation, the split plan's work items as oneTBB tasks, and
// the merge. Three parallel phases, each deterministic whatever the thread
// count, because every task writes only its own slice:
//   1. queries: rotate and scale every (sequence, query head) row once;
//   2. items:   (sequence, KV head, split) -> partial softmax states;
//   3. merge:   (sequence, query head) -> output row and LSE, splits in order.
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel.hpp"
#include "simd/dispatch.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {
namespace {

using cpu::DecodeProblem;

// decode_reference's prepare_query: rotate (Lloyd-Max keys), then times
// softmax_scale * log2(e).
void prepare_query(const DecodeArgs& a, const Format& f, const core::Rotation& rot, std::int64_t row, float* out) {
  const int dims = f.head_dim;
  float q[core::kMaxHeadDim];
  float rotated[core::kMaxHeadDim];
  detail::load_row(a.query.data, a.query_dtype, row * dims, dims, q);
  const float* src = q;
  if (!f.fp8_keys()) {
    core::rotate_forward(rot, q, rotated, dims);
    src = rotated;
  }
  const float factor = core::mul_rn(a.softmax_scale, core::kLog2e);
  for (int d = 0; d < dims; ++d) out[d] = core::mul_rn(src[d], factor);
}

struct Item {
  int b, h, s, tokens;
};

void run(const cpu::IsaKernels& k, const ConstCacheView& cache, const DecodeArgs& a, const Codebook& cb,
         const core::Rotation& rot, int threads) {
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  const int group = a.num_q_heads / l.num_kv_heads;
  const auto* seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  const std::int64_t rows = std::int64_t{a.batch} * a.num_q_heads;

  DecodeProblem p;
  p.cache = cache.data;
  p.layout = l;
  p.block_table = static_cast<const std::int32_t*>(a.block_table.data);
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.seq_lens = seq_lens;
  p.num_splits = a.num_splits;
  p.num_q_heads = a.num_q_heads;
  p.group = group;
  p.codebook = &cb;

  // The non-empty work items, longest first (a better schedule; the results do
  // not depend on the order).
  std::vector<Item> items;
  for (int b = 0; b < a.batch; ++b) {
    for (int s = 0; s < a.num_splits; ++s) {
      const core::TokenRange r = core::split_range(seq_lens[b], a.num_splits, s);
      if (r.empty()) continue;
      for (int h = 0; h < l.num_kv_heads; ++h) items.push_back({b, h, s, r.size()});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.tokens > y.tokens; });

  const std::int64_t query_floats = rows * dims;
  const std::int64_t partial_floats =
      std::int64_t{a.batch} * l.num_kv_heads * a.num_splits * group * (dims + 16);
  cpu::Workspace ws(static_cast<std::size_t>(query_floats + partial_floats + 16));
  float* base = ws.data();
  float* queries = base;
  p.queries = queries;
  p.partials = queries + query_floats;

  const std::int64_t scratch_floats = cpu::decode_scratch_floats(group);
  tbb::enumerable_thread_specific<std::vector<float>> scratch(
      [scratch_floats] { return std::vector<float>(static_cast<std::size_t>(scratch_floats)); });
  float* lse = static_cast<float*>(a.lse.data);

  const auto body = [&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 8), [&](const tbb::blocked_range<std::int64_t>& r) {
      for (std::int64_t row = r.begin(); row < r.end(); ++row) {
        prepare_query(a, l.format, rot, row, queries + row * dims);
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, items.size(), 1),
                      [&](const tbb::blocked_range<std::size_t>& r) {
                        float* sc = scratch.local().data();
                        for (std::size_t i = r.begin(); i < r.end(); ++i) {
                          k.decode_item(p, items[i].b, items[i].h, items[i].s, sc);
                        }
                      });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 4), [&](const tbb::blocked_range<std::int64_t>& r) {
      alignas(64) float out[core::kMaxHeadDim];
      for (std::int64_t row = r.begin(); row < r.end(); ++row) {
        const int b = static_cast<int>(row / a.num_q_heads);
        const int qh = static_cast<int>(row % a.num_q_heads);
        float row_lse;
        k.merge_row(p, b, qh, out, &row_lse);
        if (a.out_dtype == DType::kFloat32) {
          std::memcpy(static_cast<char*>(a.out.data) + row * dims * 4, out, std::size_t(dims) * 4);
        } else {
          for (int d = 0; d < dims; ++d) detail::store_element(a.out.data, a.out_dtype, row * dims + d, out[d]);
        }
        if (lse != nullptr) lse[row] = row_lse;
      }
    });
  };
  if (threads > 0) {
    cpu::arena_for(threads).execute(body);
  } else {
    body();
  }
}

}  // namespace

Status decode_cpu(const ConstCacheView& cache, const DecodeArgs& a, const CpuOptions& options) {
  if (options.threads < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "options.threads = " + std::to_string(options.threads) + ": must be >= 0 (0: all)");
  }
  if (Status s = validate_decode(cache, a); !s.ok()) return s;
  const cpu::IsaKernels* k = nullptr;
  if (Status s = cpu::select_isa(options.isa, &k); !s.ok()) return s;
  const Codebook* cb = nullptr;
  core::Rotation rot;
  (void)detail::resolve_codebook(cache.layout.format, a.codebook, &cb);  // validated above
  (void)detail::resolve_rotation(cache.layout.format, a.rotation, &rot);
  if (a.batch == 0) return Status();
  run(*k, cache, a, *cb, rot, options.threads);
  return Status();
}

std::vector<std::string> available_isas() { return cpu::runnable_isas(); }

std::string cpu_backend_name(const CpuOptions& options) {
  const cpu::IsaKernels* k = nullptr;
  if (!cpu::select_isa(options.isa, &k).ok()) return std::string();
  return std::string("cpu:") + k->name;
}

}  // namespace turboquant
