#include "case_meta.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace turboquant::io::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string all_preset_names() {
  std::string s;
  for (Preset p : kAllPresets) s += (s.empty() ? "" : ", ") + std::string(preset_name(p));
  return s;
}

// A JSON value as it appears in the file, shortened for a one-line message.
// Arrays and objects are never dumped: dump() recurses once per nesting level,
// and a meta.json of 100,000 '[' overflowed the stack (fuzzing, RELIABILITY.md).
std::string shown(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

Status meta_int(const json& meta, const std::string& path, const char* key, bool required, int* out) {
  const auto it = meta.find(key);
  if (it == meta.end()) return required ? invalid(path, std::string("missing key \"") + key + "\"") : Status();
  if (!it->is_number_integer()) {
    return invalid(path, std::string(key) + " = " + shown(*it) + " must be an integer");
  }
  // Range-checked before narrowing, so that a huge value is reported, not wrapped.
  const bool fits = it->is_number_unsigned()
                        ? it->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<int>::max())
                        : it->get<std::int64_t>() >= std::numeric_limits<int>::min() &&
                              it->get<std::int64_t>() <= std::numeric_limits<int>::max();
  if (!fits) return invalid(path, std::string(key) + " = " + shown(*it) + " does not fit in a 32-bit int");
  const std::int64_t v = it->get<std::int64_t>();
  *out = static_cast<int>(v);
  return Status();
}

}  // namespace

Status parse_case_meta(const std::string& path, CaseDir* c) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return invalid(path, "no such file (every case directory needs one)");
  if (!fs::is_regular_file(path, ec)) return invalid(path, "not a regular file");
  std::ifstream f(path);
  if (!f) return invalid(path, "cannot open");
  std::stringstream text;
  text << f.rdbuf();
  json meta;
  try {
    meta = json::parse(text.str());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double such as 1e999
    // (which once escaped load_case as an exception: fuzz_case_dir).
    return invalid(path, std::string("invalid JSON: ") + e.what());
  }
  if (!meta.is_object()) return invalid(path, "expected a JSON object, found " + std::string(meta.type_name()));

  // A key this reader does not know is an error, never ignored: a case from a
  // newer writer (a window, say) must not be decoded as if it were absent.
  static constexpr const char* kKnownKeys[] = {"preset",      "head_dim", "block_size", "num_kv_heads",
                                               "num_q_heads", "scale",    "num_kv_splits", "source",
                                               "layout",      "fp8_format", "sliding_window"};
  for (const auto& item : meta.items()) {
    if (std::find_if(std::begin(kKnownKeys), std::end(kKnownKeys),
                     [&](const char* k) { return item.key() == k; }) == std::end(kKnownKeys)) {
      return invalid(path, "unknown key \"" + item.key() + "\" (known: preset, head_dim, block_size, num_kv_heads, "
                           "num_q_heads, scale, num_kv_splits, source, layout, fp8_format, sliding_window)");
    }
  }

  const auto preset = meta.find("preset");
  if (preset == meta.end()) return invalid(path, "missing key \"preset\"");
  if (!preset->is_string()) return invalid(path, "preset = " + shown(*preset) + " must be a string");
  c->preset_name = preset->get<std::string>();
  const std::optional<Preset> p = preset_from_name(c->preset_name);
  if (!p) return invalid(path, "preset = " + shown(*preset) + " is not one of " + all_preset_names());
  c->preset = *p;

  int head_dim = 0, block_size = 0, num_kv_heads = 0;
  for (auto [key, dst] : {std::pair{"head_dim", &head_dim}, std::pair{"block_size", &block_size},
                          std::pair{"num_kv_heads", &num_kv_heads}, std::pair{"num_q_heads", &c->num_q_heads}}) {
    if (Status s = meta_int(meta, path, key, true, dst); !s.ok()) return s;
  }
  LayoutKind layout = LayoutKind::kSoA;  // absent: the layout of the first cases (2026-11-29)
  if (const auto it = meta.find("layout"); it != meta.end()) {
    const std::optional<LayoutKind> k = it->is_string() ? layout_from_name(it->get<std::string>()) : std::nullopt;
    if (!k) return invalid(path, "layout = " + shown(*it) + " is not one of \"soa\", \"aos\"");
    layout = *k;
  }
  Fp8Format fp8 = Fp8Format::kE4m3;  // absent: e4m3, what vLLM writes on sm_89+
  if (const auto it = meta.find("fp8_format"); it != meta.end()) {
    const std::optional<Fp8Format> f = it->is_string() ? fp8_format_from_name(it->get<std::string>()) : std::nullopt;
    if (!f) return invalid(path, "fp8_format = " + shown(*it) + " is not one of \"e4m3\", \"e4b15\"");
    if (c->preset != Preset::kK8V4) {
      return invalid(path, "fp8_format = " + shown(*it) + ": only turboquant_k8v4 has FP8 keys, not " + c->preset_name);
    }
    fp8 = *f;
  }
  c->format = preset_format(c->preset, head_dim, layout, fp8);
  c->layout = BlockLayout{c->format, block_size, num_kv_heads};
  if (Status s = validate_layout(c->layout); !s.ok()) return invalid(path, s.message());
  if (c->num_q_heads < 1 || c->num_q_heads % num_kv_heads != 0) {
    return invalid(path, "num_q_heads = " + std::to_string(c->num_q_heads) +
                             " must be a positive multiple of num_kv_heads = " + std::to_string(num_kv_heads));
  }

  const auto scale = meta.find("scale");
  if (scale == meta.end()) return invalid(path, "missing key \"scale\"");
  if (!scale->is_number()) return invalid(path, "scale = " + shown(*scale) + " must be a number");
  c->scale = scale->get<double>();
  if (!std::isfinite(c->scale)) return invalid(path, "scale = " + shown(*scale) + " must be finite");

  c->num_kv_splits = 32;
  if (Status s = meta_int(meta, path, "num_kv_splits", false, &c->num_kv_splits); !s.ok()) return s;
  if (c->num_kv_splits < 1) {
    return invalid(path, "num_kv_splits = " + std::to_string(c->num_kv_splits) + " must be >= 1");
  }
  c->sliding_window = 0;
  if (Status s = meta_int(meta, path, "sliding_window", false, &c->sliding_window); !s.ok()) return s;
  if (meta.contains("sliding_window") && c->sliding_window < 1) {
    return invalid(path, "sliding_window = " + std::to_string(c->sliding_window) +
                             " must be >= 1 (leave the key out for no window)");
  }
  c->source.clear();
  if (const auto src = meta.find("source"); src != meta.end()) {
    if (!src->is_string()) return invalid(path, "source = " + shown(*src) + " must be a string");
    c->source = src->get<std::string>();
  }
  return Status();
}

}  // namespace turboquant::io::detail
