// turboquant._encode / _decode / _dequantize: the arrays checked (arrays.hpp),
// the backend chosen (the arrays' device unless `backend` names one), then one
// library call with the GIL released. The Python layer (turboquant/__init__.py)
// supplies defaults and allocates outputs; everything that can be wrong with
// an argument is found here or by the library, before anything is written.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "call_route.hpp"
#include "device_ops.hpp"
#include "errors.hpp"
#include "tables.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/cpu.hpp"

namespace tqpy {
namespace {

using turboquant::BackendOptions;
using turboquant::Status;

// A decode with its arguments checked and its backend chosen.
struct PreparedDecode {
  turboquant::ConstCacheView view;
  turboquant::DecodeArgs args;
  Route where;
  Device device;
  turboquant::MutableBuffer workspace;
  BackendOptions options;
  std::optional<turboquant::Codebook> codebook;  // args.codebook points here

  Status run(std::uintptr_t stream) const {
    return where.cuda ? cuda_decode(view, args, where.fast, device.id, stream, workspace)
                      : where.host->decode(view, args, options);
  }
};

// Multi-token rows, sinks and windows of a decode (DecodeArgs' last fields).
struct DecodeExtras {
  const std::optional<InArray>& query_start_loc;
  const std::optional<InArray>& sinks;
  int sliding_window;
};

void prepare_decode(PreparedDecode* p, const PyLayout& l, const InArray& query_a, const InArray& cache_a,
                    const InArray& table_a, const InArray& lens_a, double scale, int num_splits, const OutArray& out_a,
                    const std::optional<OutArray>& lse_a, const std::string& backend,
                    const std::optional<OutArray>& workspace_a, const std::optional<InArray>& centroids_a,
                    const std::optional<InArray>& rotation_a, int threads, bool check_finite,
                    const DecodeExtras& extras) {
  const int D = l.layout.format.head_dim;
  // T query rows: one per sequence (T = B), or query_start_loc[B] of them.
  const bool multi = extras.query_start_loc.has_value();
  const char* rows = multi ? "T" : "B";
  const ArrayArg query = in_array("query", query_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {-1, -1, D},
                                  {rows, "Hq", "head_dim"});
  const std::int64_t T = query.dim(0), Hq = query.dim(1);
  const ArrayArg table = in_array("block_table", table_a, {Elem::kInt32}, {multi ? -1 : T, -1},
                                  {"B", "max_blocks_per_seq"});
  const std::int64_t B = table.dim(0);
  const ArrayArg cache = cache_array(l, cache_a, in_array);
  const ArrayArg lens = in_array("seq_lens", lens_a, {Elem::kInt32}, {B}, {"B"});
  const ArrayArg out = out_array("out", out_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {T, Hq, D},
                                 {rows, "Hq", "head_dim"});
  std::optional<ArrayArg> lse, qsl, sinks;
  if (lse_a) lse = out_array("lse", *lse_a, {Elem::kFloat32}, {T, Hq}, {rows, "Hq"});
  if (multi) qsl = in_array("query_start_loc", *extras.query_start_loc, {Elem::kInt32}, {B + 1}, {"B + 1"});
  if (extras.sinks) sinks = in_array("sinks", *extras.sinks, {Elem::kFloat32}, {Hq}, {"Hq"});
  std::optional<ArrayArg> workspace;
  if (workspace_a) workspace = out_array("workspace", *workspace_a, {Elem::kUInt8}, {-1}, {"bytes"});
  const std::optional<ArrayArg> rot = caller_rotation(l, rotation_a);
  p->device = common_device({&query, &cache, &table, &lens, &out, lse ? &*lse : nullptr,
                             workspace ? &*workspace : nullptr, rot ? &*rot : nullptr, qsl ? &*qsl : nullptr,
                             sinks ? &*sinks : nullptr});
  p->where = route(backend, p->device, query);
  if (workspace && !p->where.cuda) throw_value_error("workspace: only the CUDA backends take a workspace");
  p->codebook = caller_codebook(l, centroids_a);

  turboquant::DecodeArgs& args = p->args;
  args.query = query.in();
  args.query_dtype = query.dtype();
  args.batch = as_int("B", B);
  args.num_q_heads = as_int("Hq", Hq);
  args.block_table = table.in();
  args.max_blocks_per_seq = as_int("max_blocks_per_seq", table.dim(1));
  args.seq_lens = lens.in();
  args.softmax_scale = static_cast<float>(scale);
  args.num_splits = num_splits;
  args.out = out.out();
  args.out_dtype = out.dtype();
  if (lse) args.lse = lse->out();
  args.codebook = p->codebook ? &*p->codebook : nullptr;
  if (rot) args.rotation = rot->in();
  args.check_finite = check_finite;
  if (qsl) args.query_start_loc = qsl->in();
  args.num_query_rows = as_int("T", T);
  if (sinks) args.sinks = sinks->in();
  args.sliding_window = extras.sliding_window;
  p->view = cache_view(l, cache);
  p->options = host_options(threads);
  if (workspace) p->workspace = workspace->out();
}

void decode(const PyLayout& l, const InArray& query, const InArray& cache, const InArray& table, const InArray& lens,
            double scale, int num_splits, const OutArray& out, const std::optional<OutArray>& lse,
            const std::string& backend, const StreamArg& stream, const std::optional<OutArray>& workspace,
            const std::optional<InArray>& centroids, const std::optional<InArray>& rotation, int threads,
            bool check_finite, const std::optional<InArray>& query_start_loc, const std::optional<InArray>& sinks,
            int sliding_window) {
  PreparedDecode p;
  prepare_decode(&p, l, query, cache, table, lens, scale, num_splits, out, lse, backend, workspace, centroids,
                 rotation, threads, check_finite, DecodeExtras{query_start_loc, sinks, sliding_window});
  const std::uintptr_t on = call_stream(stream, p.device, query);
  Status s;
  {
    nb::gil_scoped_release release;
    s = p.run(on);
  }
  check(s, "decode");
}

// For the Python-overhead benchmark (docs/PERFORMANCE.md): the host time of
// `calls` library calls with the same arguments, each timed alone (the device
// is drained between calls, outside the timed region, so the launch queue
// never fills and the host time is not the GPU's).
std::vector<std::int64_t> decode_call_ns(const PyLayout& l, const InArray& query, const InArray& cache,
                                         const InArray& table, const InArray& lens, double scale, int num_splits,
                                         const OutArray& out, const std::optional<OutArray>& lse,
                                         const std::string& backend, std::uintptr_t stream,
                                         const std::optional<OutArray>& workspace, int calls) {
  PreparedDecode p;
  const std::optional<InArray> none;
  prepare_decode(&p, l, query, cache, table, lens, scale, num_splits, out, lse, backend, workspace, none, none, 0, true,
                 DecodeExtras{none, none, 0});
  std::vector<std::int64_t> ns;
  Status s;
  {
    nb::gil_scoped_release release;
    for (int i = 0; i < calls && s.ok(); ++i) {
      s = device_synchronize(p.device);
      const auto t0 = std::chrono::steady_clock::now();
      if (s.ok()) s = p.run(stream);
      const auto t1 = std::chrono::steady_clock::now();
      ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    }
    if (s.ok()) s = device_synchronize(p.device);
  }
  check(s, "decode");
  return ns;
}

void encode(const PyLayout& l, const OutArray& cache_a, const InArray& keys_a, const InArray& values_a,
            const InArray& slots_a, const std::string& backend, const StreamArg& stream,
            const std::optional<InArray>& centroids_a, const std::optional<InArray>& rotation_a, int threads,
            bool check_finite) {
  const int D = l.layout.format.head_dim, Hk = l.layout.num_kv_heads;
  const ArrayArg cache = cache_array(l, cache_a, out_array);
  const ArrayArg keys = in_array("keys", keys_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {-1, Hk, D}, {"num_tokens", "num_kv_heads", "head_dim"});
  const std::int64_t N = keys.dim(0);
  const ArrayArg values =
      in_array("values", values_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {N, Hk, D}, {"num_tokens", "num_kv_heads", "head_dim"});
  if (values.elem != keys.elem) {
    throw nb::type_error(("values: dtype " + std::string(elem_name(values.elem)) + " differs from keys' " +
                          elem_name(keys.elem) + " (both must have one dtype)")
                             .c_str());
  }
  const ArrayArg slots = in_array("slot_mapping", slots_a, {Elem::kInt64}, {N}, {"num_tokens"});
  const std::optional<ArrayArg> rot = caller_rotation(l, rotation_a);
  const Device device = common_device({&cache, &keys, &values, &slots, rot ? &*rot : nullptr});
  const Route where = route(backend, device, keys);
  const std::optional<turboquant::Codebook> cb = caller_codebook(l, centroids_a);

  turboquant::EncodeArgs args;
  args.keys = keys.in();
  args.values = values.in();
  args.dtype = keys.dtype();
  args.num_tokens = N;
  args.slot_mapping = slots.in();
  args.codebook = cb ? &*cb : nullptr;
  if (rot) args.rotation = rot->in();
  args.check_finite = check_finite;
  const turboquant::CacheView view{l.layout, static_cast<std::uint8_t*>(cache.mutable_data), cache.dim(0)};
  const BackendOptions options = host_options(threads);
  const std::uintptr_t on = call_stream(stream, device, cache_a);

  Status s;
  {
    nb::gil_scoped_release release;
    s = where.cuda ? cuda_encode(view, args, device.id, on) : where.host->encode(view, args, options);
  }
  check(s, "encode");
}

turboquant::Basis basis_of(const std::string& basis) {
  if (basis == "original") return turboquant::Basis::kOriginal;
  if (basis == "rotated") return turboquant::Basis::kRotated;
  throw_value_error("basis = '" + basis + "' is not one of 'original', 'rotated'");
}

void dequantize(const PyLayout& l, const InArray& cache_a, const InArray& slots_a, const OutArray& keys_a,
                const OutArray& values_a, const std::string& basis, const std::string& backend, const StreamArg& stream,
                const std::optional<InArray>& centroids_a, const std::optional<InArray>& rotation_a, int threads) {
  const int D = l.layout.format.head_dim, Hk = l.layout.num_kv_heads;
  const ArrayArg cache = cache_array(l, cache_a, in_array);
  const ArrayArg slots = in_array("slots", slots_a, {Elem::kInt64}, {-1}, {"num_slots"});
  const std::int64_t N = slots.dim(0);
  const ArrayArg keys = out_array("keys", keys_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {N, Hk, D},
                                  {"num_slots", "num_kv_heads", "head_dim"});
  const ArrayArg values = out_array("values", values_a, {keys.elem}, {N, Hk, D}, {"num_slots", "num_kv_heads", "head_dim"});
  const std::optional<ArrayArg> rot = caller_rotation(l, rotation_a);
  const Device device = common_device({&cache, &slots, &keys, &values, rot ? &*rot : nullptr});
  const Route where = route(backend, device, cache);
  const std::optional<turboquant::Codebook> cb = caller_codebook(l, centroids_a);
  turboquant::DequantizeArgs args;
  args.basis = basis_of(basis);
  args.slots = slots.in();
  args.num_slots = N;
  args.keys = keys.out();
  args.values = values.out();
  args.out_dtype = keys.dtype();
  args.codebook = cb ? &*cb : nullptr;
  if (rot) args.rotation = rot->in();
  const turboquant::ConstCacheView view = cache_view(l, cache);
  const BackendOptions options = host_options(threads);
  const std::uintptr_t on = call_stream(stream, device, cache_a);
  Status s;
  {
    nb::gil_scoped_release release;
    s = where.cuda ? cuda_dequantize(view, args, device.id, on) : where.host->dequantize(view, args, options);
  }
  check(s, "dequantize");
}

void dequantize_sequences(const PyLayout& l, const InArray& cache_a, const InArray& table_a, const InArray& lens_a,
                          const OutArray& keys_a, const OutArray& values_a, const std::string& basis,
                          const std::string& backend, const StreamArg& stream, const std::optional<InArray>& centroids_a,
                          const std::optional<InArray>& rotation_a) {
  const int D = l.layout.format.head_dim, Hk = l.layout.num_kv_heads;
  const ArrayArg cache = cache_array(l, cache_a, in_array);
  const ArrayArg table = in_array("block_table", table_a, {Elem::kInt32}, {-1, -1}, {"B", "max_blocks_per_seq"});
  const std::int64_t B = table.dim(0);
  const ArrayArg lens = in_array("seq_lens", lens_a, {Elem::kInt32}, {B}, {"B"});
  const ArrayArg keys = out_array("keys", keys_a, {Elem::kFloat32, Elem::kFloat16, Elem::kBFloat16}, {B, Hk, -1, D},
                                  {"B", "num_kv_heads", "max_seq", "head_dim"});
  const ArrayArg values = out_array("values", values_a, {keys.elem}, {B, Hk, keys.dim(2), D},
                                    {"B", "num_kv_heads", "max_seq", "head_dim"});
  const std::optional<ArrayArg> rot = caller_rotation(l, rotation_a);
  const Device device = common_device({&cache, &table, &lens, &keys, &values, rot ? &*rot : nullptr});
  const Route where = route(backend, device, cache);
  const std::optional<turboquant::Codebook> cb = caller_codebook(l, centroids_a);
  turboquant::DequantizeSequencesArgs args;
  args.basis = basis_of(basis);
  args.block_table = table.in();
  args.batch = as_int("B", B);
  args.max_blocks_per_seq = as_int("max_blocks_per_seq", table.dim(1));
  args.seq_lens = lens.in();
  args.max_seq = as_int("max_seq", keys.dim(2));
  args.keys = keys.out();
  args.values = values.out();
  args.out_dtype = keys.dtype();
  args.codebook = cb ? &*cb : nullptr;
  if (rot) args.rotation = rot->in();
  const turboquant::ConstCacheView view = cache_view(l, cache);
  const std::uintptr_t on = call_stream(stream, device, cache_a);
  Status s;
  {
    nb::gil_scoped_release release;
    // The CPU backends' dequantize is the golden model's.
    s = where.cuda ? cuda_dequantize_sequences(view, args, device.id, on)
                   : turboquant::dequantize_sequences_reference(view, args);
  }
  check(s, "dequantize_sequences");
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("_decode", &decode, nb::arg("layout"), nb::arg("query"), nb::arg("kv_cache"), nb::arg("block_table"),
        nb::arg("seq_lens"), nb::arg("scale"), nb::arg("num_splits"), nb::arg("out"), nb::arg("lse").none(),
        nb::arg("backend"), nb::arg("stream").none(), nb::arg("workspace").none(), nb::arg("centroids").none(),
        nb::arg("rotation").none(), nb::arg("threads"), nb::arg("check_finite"), nb::arg("query_start_loc").none(),
        nb::arg("sinks").none(), nb::arg("sliding_window"));
  m.def("_encode", &encode, nb::arg("layout"), nb::arg("kv_cache"), nb::arg("keys"), nb::arg("values"),
        nb::arg("slot_mapping"), nb::arg("backend"), nb::arg("stream").none(), nb::arg("centroids").none(),
        nb::arg("rotation").none(), nb::arg("threads"), nb::arg("check_finite"));
  m.def("_dequantize", &dequantize, nb::arg("layout"), nb::arg("kv_cache"), nb::arg("slots"), nb::arg("keys"),
        nb::arg("values"), nb::arg("basis"), nb::arg("backend"), nb::arg("stream").none(), nb::arg("centroids").none(),
        nb::arg("rotation").none(), nb::arg("threads"));
  m.def("_dequantize_sequences", &dequantize_sequences, nb::arg("layout"), nb::arg("kv_cache"), nb::arg("block_table"),
        nb::arg("seq_lens"), nb::arg("keys"), nb::arg("values"), nb::arg("basis"), nb::arg("backend"),
        nb::arg("stream").none(), nb::arg("centroids").none(), nb::arg("rotation").none());
  m.def("_decode_call_ns", &decode_call_ns, nb::arg("layout"), nb::arg("query"), nb::arg("kv_cache"),
        nb::arg("block_table"), nb::arg("seq_lens"), nb::arg("scale"), nb::arg("num_splits"), nb::arg("out"),
        nb::arg("lse").none(), nb::arg("backend"), nb::arg("stream"), nb::arg("workspace").none(), nb::arg("calls"));
  m.def("decode_workspace_bytes", &cuda_decode_workspace_bytes, nb::arg("batch"), nb::arg("num_q_heads"),
        nb::arg("num_splits"), nb::arg("head_dim"),
        "Bytes of the CUDA decode workspace for up to `batch` sequences (0 without the CUDA backend).");
  m.def("cuda_built", &cuda_built, "Whether this build has the CUDA backend.");
}

}  // namespace tqpy
