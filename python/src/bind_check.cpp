// turboquant._validate: turboquant::checks::validate_output, the function
// behind `tq validate`, on host arrays (the Python layer copies device arrays
// to numpy first). Returns the report as plain Python values.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <span>

#include "arrays.hpp"
#include "bindings.hpp"
#include "errors.hpp"
#include "tables.hpp"
#include "turboquant/check/cache_check.hpp"
#include "turboquant/check/validate.hpp"

namespace tqpy {
namespace {

namespace checks = turboquant::checks;

template <class T>
std::span<const T> span_of(const ArrayArg& a) {
  if (a.device.cuda) throw_value_error(a.name + ": validate takes host arrays (the Python layer copies them)");
  return {static_cast<const T*>(a.data), static_cast<std::size_t>(a.size())};
}

nb::dict comparison(const checks::Comparison& c) {
  nb::dict d;
  d["rel_l2"] = c.rel_l2;
  d["max_abs"] = c.max_abs;
  d["max_at"] = nb::make_tuple(c.max_seq, c.max_head, c.max_dim);
  d["got_at_max"] = c.got_at_max;
  d["want_at_max"] = c.want_at_max;
  d["cosine"] = c.cosine;
  d["worst_seq"] = c.worst_seq;
  d["worst_head"] = c.worst_head;
  d["worst_rel_l2"] = c.worst_rel_l2;
  d["non_finite"] = c.non_finite;
  return d;
}

nb::dict validate(const PyLayout& l, const InArray& output_a, const InArray& query_a, const InArray& cache_a,
                  const InArray& table_a, const InArray& lens_a, double scale, int num_splits,
                  const std::optional<InArray>& keys_a, const std::optional<InArray>& values_a,
                  const std::optional<InArray>& slots_a, const std::optional<InArray>& reference_a,
                  const std::optional<InArray>& centroids_a, double rtol, const std::string& output_name,
                  int threads, const std::optional<InArray>& qsl_a, const std::optional<InArray>& sinks_a,
                  int sliding_window) {
  const int D = l.layout.format.head_dim, Hk = l.layout.num_kv_heads;
  const bool multi = qsl_a.has_value();
  const char* row_dim = multi ? "T" : "B";
  const ArrayArg query = in_array("query", query_a, {Elem::kFloat32}, {-1, -1, D}, {row_dim, "Hq", "head_dim"});
  const std::int64_t T = query.dim(0), Hq = query.dim(1);
  const ArrayArg output = in_array("output", output_a, {Elem::kFloat32}, {T, Hq, D}, {row_dim, "Hq", "head_dim"});
  const ArrayArg cache = in_array("kv_cache", cache_a, {Elem::kUInt8},
                                  {-1, l.layout.block_size, Hk, l.layout.format.slot_bytes_aligned()},
                                  {"num_blocks", "block_size", "num_kv_heads", "slot_bytes_aligned"});
  const ArrayArg table =
      in_array("block_table", table_a, {Elem::kInt32}, {multi ? -1 : T, -1}, {"B", "max_blocks_per_seq"});
  const std::int64_t B = table.dim(0);
  const ArrayArg lens = in_array("seq_lens", lens_a, {Elem::kInt32}, {B}, {"B"});
  if (threads < 0) throw_value_error("threads = " + std::to_string(threads) + " must be >= 0 (0: all)");

  const std::optional<turboquant::Codebook> cb = caller_codebook(l, centroids_a);

  checks::ValidationInputs in;
  in.cache = turboquant::ConstCacheView(l.layout, static_cast<const std::uint8_t*>(cache.data), cache.dim(0));
  in.codebook = cb ? &*cb : nullptr;
  in.query = span_of<float>(query);
  in.batch = static_cast<int>(B);
  in.num_q_heads = static_cast<int>(Hq);
  in.block_table = span_of<std::int32_t>(table);
  in.max_blocks_per_seq = static_cast<int>(table.dim(1));
  in.seq_lens = span_of<std::int32_t>(lens);
  in.scale = scale;
  in.num_splits = num_splits;
  in.output = span_of<float>(output);
  in.output_name = output_name;
  std::optional<ArrayArg> qsl, sinks;
  if (multi) {
    qsl = in_array("query_start_loc", *qsl_a, {Elem::kInt32}, {B + 1}, {"B + 1"});
    in.query_start_loc = span_of<std::int32_t>(*qsl);
    in.num_query_rows = static_cast<int>(T);
  }
  if (sinks_a) {
    sinks = in_array("sinks", *sinks_a, {Elem::kFloat32}, {Hq}, {"Hq"});
    in.sinks = span_of<float>(*sinks);
  }
  in.sliding_window = sliding_window;
  std::optional<ArrayArg> keys, values, slots, reference;
  if (keys_a && values_a && slots_a) {
    keys = in_array("keys", *keys_a, {Elem::kFloat32}, {-1, Hk, D}, {"num_tokens", "num_kv_heads", "head_dim"});
    values = in_array("values", *values_a, {Elem::kFloat32}, {keys->dim(0), Hk, D},
                      {"num_tokens", "num_kv_heads", "head_dim"});
    slots = in_array("slot_mapping", *slots_a, {Elem::kInt64}, {keys->dim(0)}, {"num_tokens"});
    in.original = checks::OriginalKV{span_of<float>(*keys), span_of<float>(*values), span_of<std::int64_t>(*slots)};
  } else if (keys_a || values_a || slots_a) {
    throw_value_error("keys, values and slot_mapping: give all three (the original K/V and where they were "
                      "stored) or none");
  } else {
    in.original_absent_note = "no keys/values/slot_mapping given";
  }
  if (reference_a) {
    reference = in_array("reference_out_f64", *reference_a, {Elem::kFloat64}, {T, Hq, D}, {row_dim, "Hq", "head_dim"});
    in.reference_out_f64 = span_of<double>(*reference);
  }
  in.rtol = rtol;
  in.threads = threads;

  checks::ValidationReport report;
  turboquant::Status s;
  std::string text;
  {
    nb::gil_scoped_release release;
    s = checks::validate_output(in, &report);
    if (s.ok()) text = checks::render_report(report);
  }
  check(s, "validate");

  nb::list rows;
  for (const checks::ValidationRow& r : report.rows) {
    nb::dict row = comparison(r.cmp);
    row["name"] = r.name;
    row["key"] = r.key;
    row["note"] = r.note;
    rows.append(row);
  }
  nb::dict d;
  d["ok"] = report.pass;
  d["rtol"] = report.rtol;
  d["output_name"] = report.output_name;
  d["rows"] = rows;
  d["format_error_measured"] = report.format_error_measured;
  d["original_note"] = report.original_note;
  d["oracle_non_finite"] = report.oracle_non_finite;
  d["text"] = text;
  d["header"] = checks::render_decode_header(in, turboquant::preset_name(l.preset));
  return d;
}

// turboquant::checks::validate_cache: a cache some store kernel wrote against
// the golden model's encode of the same K/V, slot by slot.
nb::dict validate_cache(const PyLayout& l, const InArray& cache_a, const InArray& keys_a, const InArray& values_a,
                        const InArray& slots_a, const std::optional<InArray>& centroids_a,
                        const std::optional<InArray>& rotation_a, double boundary_ulps, int max_report,
                        const std::string& cache_name) {
  const int D = l.layout.format.head_dim, Hk = l.layout.num_kv_heads;
  const ArrayArg cache = in_array("kv_cache", cache_a, {Elem::kUInt8},
                                  {-1, l.layout.block_size, Hk, l.layout.format.slot_bytes_aligned()},
                                  {"num_blocks", "block_size", "num_kv_heads", "slot_bytes_aligned"});
  const ArrayArg keys = in_array("keys", keys_a, {Elem::kFloat32}, {-1, Hk, D}, {"num_tokens", "num_kv_heads", "head_dim"});
  const ArrayArg values =
      in_array("values", values_a, {Elem::kFloat32}, {keys.dim(0), Hk, D}, {"num_tokens", "num_kv_heads", "head_dim"});
  const ArrayArg slots = in_array("slot_mapping", slots_a, {Elem::kInt64}, {keys.dim(0)}, {"num_tokens"});
  const std::optional<ArrayArg> rot = caller_rotation(l, rotation_a);
  const std::optional<turboquant::Codebook> cb = caller_codebook(l, centroids_a);
  checks::CacheCheckInputs in;
  in.cache = turboquant::ConstCacheView(l.layout, static_cast<const std::uint8_t*>(span_of<std::uint8_t>(cache).data()),
                                        cache.dim(0));
  in.codebook = cb ? &*cb : nullptr;
  if (rot) in.rotation = span_of<float>(*rot);
  in.original = checks::OriginalKV{span_of<float>(keys), span_of<float>(values), span_of<std::int64_t>(slots)};
  in.cache_name = cache_name;
  in.boundary_ulps = boundary_ulps;
  in.max_report = max_report;
  checks::CacheReport report;
  turboquant::Status s;
  std::string text;
  {
    nb::gil_scoped_release release;
    s = checks::validate_cache(in, &report);
    if (s.ok()) text = checks::render_cache_report(report);
  }
  check(s, "validate_cache");
  nb::dict counts;
  for (checks::CacheField f : checks::kAllCacheFields) {
    if (!checks::cache_field_applies(l.layout.format, f)) continue;
    const checks::CacheFieldCounts& c = report.at(f);
    nb::dict d;
    d["identical"] = c.identical;
    d["boundary_flip"] = c.boundary_flip;
    d["one_ulp"] = c.one_ulp;
    d["wrong"] = c.wrong;
    d["worst_flip_ulps"] = c.worst_flip_ulps;
    counts[std::string(checks::cache_field_key(f)).c_str()] = d;
  }
  nb::list wrong;
  for (const checks::CacheItem& it : report.wrong_items) {
    nb::dict d;
    d["block"] = it.block;
    d["position"] = it.position;
    d["head"] = it.head;
    d["field"] = std::string(checks::cache_field_key(it.field));
    d["dim"] = it.dim;
    d["byte_offset"] = it.byte_offset;
    d["token"] = it.token;
    d["golden"] = it.golden;
    d["got"] = it.got;
    d["text"] = checks::describe_item(it);
    wrong.append(d);
  }
  nb::dict d;
  d["ok"] = report.pass;
  d["wrong"] = report.wrong;
  d["tokens"] = report.tokens;
  d["written_slots"] = report.written_slots;
  d["boundary_ulps"] = report.boundary_ulps;
  d["counts"] = counts;
  d["wrong_items"] = wrong;
  d["text"] = text;
  return d;
}

}  // namespace

void bind_check(nb::module_& m) {
  m.def("_validate_cache", &validate_cache, nb::arg("layout"), nb::arg("kv_cache"), nb::arg("keys"), nb::arg("values"),
        nb::arg("slot_mapping"), nb::arg("centroids").none(), nb::arg("rotation").none(), nb::arg("boundary_ulps"),
        nb::arg("max_report"), nb::arg("cache_name"));
  m.def("_validate", &validate, nb::arg("layout"), nb::arg("output"), nb::arg("query"), nb::arg("kv_cache"),
        nb::arg("block_table"), nb::arg("seq_lens"), nb::arg("scale"), nb::arg("num_splits"),
        nb::arg("keys").none(), nb::arg("values").none(), nb::arg("slot_mapping").none(),
        nb::arg("reference_out_f64").none(), nb::arg("centroids").none(), nb::arg("rtol"), nb::arg("output_name"),
        nb::arg("threads"), nb::arg("query_start_loc").none(), nb::arg("sinks").none(), nb::arg("sliding_window"));
}

}  // namespace tqpy
