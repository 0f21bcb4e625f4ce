// decode_cpu: validation, the split plan's work items as oneTBB tasks, and
// the merge. Query rows (one per sequence, or query_start_loc's rows, each
// over its attended range: QueryRows) are processed in chunks whose workspace
// stays under kWorkspaceCap; per chunk, three parallel phases, each
// deterministic whatever the thread count because every task writes only its
// own slice:
//   1. queries: rotate and scale every (row, query head) once;
//   2. items:   (row, KV head, non-empty split) -> partial softmax states; the
//               rows of a sequence with several (q_len > 1) share one item per
//               (KV head, split index), which reads the union of their split-s
//               ranges once for all of them (decode_rows), the same bits;
//   3. merge:   (row, query head) -> output row and LSE, splits in order.
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "parallel.hpp"
#include "simd/dispatch.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/detail/query.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant {
namespace {

using cpu::DecodeProblem;

// Workspace (floats) one chunk of sequences may use, unless a single
// sequence needs more.
constexpr std::int64_t kWorkspaceCap = std::int64_t{64} << 20;  // 256 MiB

// Rows [b, b + rows) of one sequence, KV head h, split s; `work` (tokens
// summed over the rows) orders the items.
struct Item {
  int b, rows, h, s;
  std::int64_t work;
};

// The workspace of a chunk of sequences: their prepared query rows, then
// their partials (core::PartialLayout, as many splits per row as the chunk's
// longest split plan uses).
struct ChunkLayout {
  std::int64_t query_floats;
  core::PartialLayout partials;
  std::int64_t floats() const { return query_floats + partials.total_bytes() / 4; }
};
ChunkLayout chunk_layout(int dims, std::int64_t rows, int max_used_splits) {
  return ChunkLayout{rows * dims, core::PartialLayout{cpu::partial_acc_pitch(dims), max_used_splits, rows}};
}

// The per-row arrays of a call with query_start_loc, a window or sinks: row r
// attends to [begin[r], begin[r] + len[r]) of sequence seq[r] (the golden
// model's rows, core::attended_range). Without any of them, row b is sequence
// b and p keeps the call's seq_lens.
struct QueryRows {
  std::vector<std::int32_t> len, begin, seq;
  std::vector<float> sink_logits;
  int max_q_len = 1;

  // Points p at the arrays; returns the number of rows.
  int attach(const DecodeArgs& a, DecodeProblem* p) {
    if (!decode_uses_rows_sinks_or_window(a)) return a.batch;
    const auto* seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
    const auto* starts = static_cast<const std::int32_t*>(a.query_start_loc.data);
    for (int b = 0; b < a.batch; ++b) {
      const int q_len = starts != nullptr ? starts[b + 1] - starts[b] : 1;
      max_q_len = std::max(max_q_len, q_len);
      for (int i = 0; i < q_len; ++i) {
        const core::TokenRange r = core::attended_range(seq_lens[b] - q_len + i, a.sliding_window);
        len.push_back(r.size());
        begin.push_back(r.begin);
        seq.push_back(b);
      }
    }
    p->seq_lens = len.data();
    p->row_begin = begin.data();
    p->row_sequence = seq.data();
    if (a.sinks.data != nullptr) {
      const auto* sinks = static_cast<const float*>(a.sinks.data);
      for (int h = 0; h < a.num_q_heads; ++h) sink_logits.push_back(core::sink_logit(sinks[h]));
      p->sink_logits = sink_logits.data();
    }
    return static_cast<int>(len.size());
  }
};

// Decodes query rows [b0, b1) with `ws` (layout c) holding their queries and partials.
void run_chunk(const cpu::IsaKernels& k, DecodeProblem p, const DecodeArgs& a, const core::Rotation& rot, int b0,
               int b1, float* ws, const ChunkLayout& c, tbb::enumerable_thread_specific<std::vector<float>>& scratch) {
  const BlockLayout& l = p.layout;
  const int dims = l.format.head_dim;
  const std::int64_t rows = std::int64_t{b1 - b0} * a.num_q_heads;
  p.queries = ws;
  p.first_row_batch = b0;
  p.partials = c.partials;
  p.partial_acc = ws + c.query_floats;
  p.partial_ml = p.partial_acc + c.partials.ml_region_offset() / 4;
  std::vector<Item> items;  // non-empty work items, longest first (results do not depend on the order)
  for (int b = b0; b < b1;) {
    int e = b + 1;  // rows [b, e): one sequence's rows in this chunk
    const auto same_sequence = [&](int r) { return p.row_sequence && p.row_sequence[r] == p.row_sequence[b]; };
    while (e < b1 && e - b < cpu::kMaxItemRows && same_sequence(e)) ++e;
    int used = 0;
    for (int r = b; r < e; ++r) used = std::max(used, cpu::used_splits(p.seq_lens[r], a.num_splits));
    for (int s = 0; s < used; ++s) {
      std::int64_t work = 0;
      for (int r = b; r < e; ++r) work += p.token_range(r, s).size();
      for (int h = 0; h < l.num_kv_heads; ++h) items.push_back({b, e - b, h, s, work});
    }
    b = e;
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.work > y.work; });
  const auto local_scratch = [&scratch] {
    const auto address = reinterpret_cast<std::uintptr_t>(scratch.local().data());
    return reinterpret_cast<float*>((address + 63) & ~std::uintptr_t{63});
  };
  float* lse = static_cast<float*>(a.lse.data);
  const std::int64_t first_row = std::int64_t{b0} * a.num_q_heads;

  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 8), [&](const tbb::blocked_range<std::int64_t>& r) {
    for (std::int64_t row = r.begin(); row < r.end(); ++row) {
      detail::prepare_query_row(a, l.format, rot, first_row + row, ws + row * dims);
    }
  });
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, items.size(), 1), [&](const tbb::blocked_range<std::size_t>& r) {
    float* sc = local_scratch();
    for (std::size_t i = r.begin(); i < r.end(); ++i) {
      const Item& it = items[i];
      if (it.rows == 1) {
        k.decode_item(p, it.b, it.h, it.s, sc);
      } else {
        k.decode_rows(p, it.b, it.b + it.rows, it.h, it.s, sc);
      }
    }
  });
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 4), [&](const tbb::blocked_range<std::int64_t>& r) {
    alignas(64) float out[core::kMaxHeadDim];
    for (std::int64_t i = r.begin(); i < r.end(); ++i) {
      const std::int64_t row = first_row + i;
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
}

void run(const cpu::IsaKernels& k, const ConstCacheView& cache, const DecodeArgs& a, const Codebook& cb,
         const core::Rotation& rot) {
  const BlockLayout& l = cache.layout;
  const int dims = l.format.head_dim;
  DecodeProblem p;
  p.cache = cache.data;
  p.layout = l;
  p.block_table = static_cast<const std::int32_t*>(a.block_table.data);
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  p.num_splits = a.num_splits;
  p.num_q_heads = a.num_q_heads;
  p.group = a.num_q_heads / l.num_kv_heads;
  p.codebook = &cb;
  // Query rows, windows, sinks (docs/ARITHMETIC.md §7): the work items run per
  // query row over its attended range, the sinks enter the merge.
  QueryRows qr;
  const int rows = qr.attach(a, &p);

  const std::int64_t scratch_floats =
      (qr.max_q_len > 1 ? cpu::decode_rows_scratch_floats(p.group, dims) : cpu::decode_scratch_floats(p.group)) + 16;
  tbb::enumerable_thread_specific<std::vector<float>> scratch(
      [scratch_floats] { return std::vector<float>(static_cast<std::size_t>(scratch_floats)); });

  const auto used = [&](int b) { return cpu::used_splits(p.seq_lens[b], a.num_splits); };
  for (int b0 = 0; b0 < rows;) {
    int max_used = used(b0);
    int b1 = b0 + 1;
    for (; b1 < rows; ++b1) {
      const int wider = std::max(max_used, used(b1));
      if (chunk_layout(dims, std::int64_t{b1 + 1 - b0} * a.num_q_heads, wider).floats() > kWorkspaceCap) break;
      max_used = wider;
    }
    const ChunkLayout c = chunk_layout(dims, std::int64_t{b1 - b0} * a.num_q_heads, max_used);
    cpu::Workspace ws(static_cast<std::size_t>(c.floats()));
    run_chunk(k, p, a, rot, b0, b1, ws.data(), c, scratch);
    b0 = b1;
  }
}

}  // namespace

Status decode_cpu(const ConstCacheView& cache, const DecodeArgs& a, const CpuOptions& options) {
  const cpu::IsaKernels* k = nullptr;
  if (Status s = cpu::start_call(options, validate_decode(cache, a), &k); !s.ok()) return s;
  if (a.batch == 0) return Status();
  const Codebook* cb = nullptr;
  core::Rotation rot;
  (void)detail::resolve_codebook(cache.layout.format, a.codebook, &cb);  // validated above
  (void)detail::resolve_rotation(cache.layout.format, a.rotation, &rot);
  return cpu::run_in_arena(options.threads, "workspace", [&] { run(*k, cache, a, *cb, rot); });
}

std::vector<std::string> available_isas() { return cpu::runnable_isas(); }

std::string cpu_backend_name(const CpuOptions& options) {
  const cpu::IsaKernels* k = nullptr;
  if (!cpu::select_isa(options.isa, &k).ok()) return std::string();
  return std::string("cpu:") + k->name;
}

}  // namespace turboquant
