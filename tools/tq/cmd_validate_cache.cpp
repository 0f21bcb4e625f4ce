// tq validate CASE --cache FILE: loads the case's K/V (keys.npy, values.npy,
// slot_mapping.npy; layout, preset and FP8 flavour from meta.json) and FILE (a
// uint8 .npy shaped like kv_cache.npy), and prints turboquant::check's
// validate_cache classification of every element of FILE.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common.hpp"
#include "turboquant/check/case_inputs.hpp"
#include "turboquant/io/npy.hpp"
#include "validate_cache.hpp"

namespace tq {
namespace {

namespace fs = std::filesystem;
namespace io = turboquant::io;
namespace checks = turboquant::checks;

// FILE as given, or inside the case directory (like --output).
std::string resolve_cache_path(const io::CaseDir& c, const std::string& file) {
  std::error_code ec;
  for (const std::string& candidate : {file, c.file(file), c.file(file + ".npy")}) {
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  fail(file, "no such file (also looked in " + c.path + ")");
}

// FILE must be uint8 [num_blocks, block_size, Hk, slot_bytes] of the case's
// layout (and num_blocks of the case's kv_cache.npy, when it has one).
io::NpyArray load_cache_file(const io::CaseDir& c, const std::string& path) {
  io::NpyArray a;
  ensure(io::read_npy(path, &a));
  const char* like = " like the case's kv_cache.npy";
  if (a.dtype != io::NpyDType::kUInt8) {
    fail(path, std::string("dtype ") + io::npy_dtype_name(a.dtype) + ", expected uint8" + like);
  }
  const std::int64_t blocks = c.kv_cache.present ? c.kv_cache.dim(0) : (a.ndim() > 0 ? a.shape[0] : 0);
  const std::vector<std::int64_t> want{blocks, c.block_size(), c.num_kv_heads(), c.format.slot_bytes_aligned()};
  if (a.shape != want) {
    fail(path, "shape " + a.shape_string() + ", expected " + io::format_shape(want) +
                   " [num_blocks, block_size, Hk, slot_bytes]" + like);
  }
  return a;
}

json item_json(const checks::CacheItem& it) {
  json j{{"block", it.block},
         {"position", it.position},
         {"head", it.head},
         {"field", checks::cache_field_key(it.field)},
         {"dim", it.dim},
         {"byte", it.byte_offset},
         {"token", it.token},
         {"golden", it.golden},
         {"cache", it.got},
         {"boundary_ulps", it.boundary_ulps >= 0 ? json_number(it.boundary_ulps) : json(nullptr)}};
  if (it.field == checks::CacheField::kUntouched) {
    j["within"] = it.within == checks::CacheField::kUntouched ? json("padding") : json(checks::cache_field_key(it.within));
  }
  return j;
}

}  // namespace

int run_validate_cache(const ValidateCacheOptions& o) {
  if (o.max_report < 0) fail("--max-report", fmt("%d must be >= 0", o.max_report));
  const io::CaseDir c = load_case(o.case_dir, io::CaseLoadOptions::encode());
  const std::string path = resolve_cache_path(c, o.cache);
  const io::NpyArray file = load_cache_file(c, path);

  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);
  checks::CacheCheckInputs in = checks::case_cache_check_inputs(
      c, codebook.get(), turboquant::ConstCacheView(c.layout, file.data.data(), file.shape[0]),
      fs::path(path).filename().string());
  in.max_report = o.max_report;
  checks::CacheReport report;
  if (Status s = checks::validate_cache(in, &report); !s.ok()) ensure(s, case_file_for_message(c, s.message()));
  const int exit_code = report.pass ? kExitOk : kExitFailed;

  if (o.json) {
    json j{{"case", c.path},
           {"preset", c.preset_name},
           {"cache", path},
           {"pass", report.pass},
           {"golden", "cpu-ref encode"},
           {"boundary_ulps", report.boundary_ulps},
           {"num_blocks", report.num_blocks},
           {"tokens", report.tokens},
           {"written_slots", report.written_slots},
           {"wrong", report.wrong}};
    add_format_names(j, c.format);
    json fields = json::object();
    for (checks::CacheField f : checks::kAllCacheFields) {
      if (!checks::cache_field_applies(c.format, f)) continue;
      const checks::CacheFieldCounts& n = report.at(f);
      fields[std::string(checks::cache_field_key(f))] = json{{"identical", n.identical},
                                                             {"boundary_flip", n.boundary_flip},
                                                             {"one_ulp", n.one_ulp},
                                                             {"wrong", n.wrong},
                                                             {"worst_flip_ulps", n.worst_flip_ulps}};
    }
    j["fields"] = fields;
    json items = json::array();
    for (const checks::CacheItem& it : report.wrong_items) items.push_back(item_json(it));
    j["wrong_items"] = items;
    print_json(j);
    return exit_code;
  }

  std::printf("case     %s\n", c.path.c_str());
  std::printf("format   %s: %s; block_size %d, Hk %d\n", c.preset_name.c_str(), turboquant::describe(c.format).c_str(),
              c.block_size(), c.num_kv_heads());
  std::printf("store    %lld tokens (keys.npy, values.npy, slot_mapping.npy) re-encoded by the golden model (cpu-ref)\n",
              static_cast<long long>(report.tokens));
  std::printf("cache    %s %s\n\n", path.c_str(), file.shape_string().c_str());
  std::fputs(checks::render_cache_report(report).c_str(), stdout);
  return exit_code;
}

}  // namespace tq
