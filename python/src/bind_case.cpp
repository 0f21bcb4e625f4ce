// turboquant._load_case: the case-directory loader of `tq` (turboquant::io),
// so Python reads exactly what the tool reads and refuses what it refuses
// (unknown meta.json keys, arrays whose dtype or shape disagree with
// meta.json or with each other, naming the file). The Python layer then
// loads the arrays with numpy, keeping their stored dtypes.
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "turboquant/io/case_dir.hpp"

namespace tqpy {
namespace {

namespace io = turboquant::io;

template <class T>
void add_file(nb::dict& files, const char* name, const io::CaseArray<T>& a) {
  if (a.present) files[name] = a.path;
}

using turboquant::Status;

nb::dict load_case(const std::string& dir) {
  io::CaseDir c;
  Status s;
  {
    nb::gil_scoped_release release;
    io::CaseLoadOptions options;
    options.rows_sinks_window = true;  // turboquant.decode takes them (query_start_loc=, sinks=, sliding_window=)
    s = io::load_case(dir, options, &c);
  }
  check(s, "load_case");
  nb::dict meta;
  meta["path"] = c.path;
  meta["preset"] = c.preset_name;
  meta["head_dim"] = c.head_dim();
  meta["block_size"] = c.block_size();
  meta["num_kv_heads"] = c.num_kv_heads();
  meta["num_q_heads"] = c.num_q_heads;
  meta["scale"] = c.scale;
  meta["num_kv_splits"] = c.num_kv_splits;
  meta["source"] = c.source;
  meta["layout"] = turboquant::layout_name(c.format.layout);
  meta["fp8_format"] = turboquant::fp8_format_name(c.format.fp8_format);
  meta["sliding_window"] = c.sliding_window;
  nb::dict files;
  add_file(files, "query", c.query);
  add_file(files, "keys", c.keys);
  add_file(files, "values", c.values);
  add_file(files, "slot_mapping", c.slot_mapping);
  add_file(files, "kv_cache", c.kv_cache);
  add_file(files, "block_table", c.block_table);
  add_file(files, "seq_lens", c.seq_lens);
  add_file(files, "centroids", c.centroids);
  add_file(files, "expected_out", c.expected_out);
  add_file(files, "expected_lse", c.expected_lse);
  add_file(files, "reference_out_f64", c.reference_out_f64);
  add_file(files, "query_start_loc", c.query_start_loc);
  add_file(files, "sinks", c.sinks);
  meta["files"] = files;
  return meta;
}

}  // namespace

void bind_case(nb::module_& m) {
  m.def("_load_case", &load_case, nb::arg("path"),
        "meta.json and the present files of a case directory, checked as `tq` checks them.");
}

}  // namespace tqpy
