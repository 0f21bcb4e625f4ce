#include <string>

#include "turboquant/format.hpp"

namespace turboquant {

std::optional<Preset> preset_from_name(std::string_view name) {
  for (Preset p : kAllPresets) {
    const std::string_view full = preset_name(p);
    if (name == full || name == full.substr(std::string_view("turboquant_").size())) return p;
  }
  return std::nullopt;
}

std::optional<LayoutKind> layout_from_name(std::string_view name) {
  for (LayoutKind k : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    if (name == layout_name(k)) return k;
  }
  return std::nullopt;
}

std::optional<Fp8Format> fp8_format_from_name(std::string_view name) {
  for (Fp8Format f : {Fp8Format::kE4m3, Fp8Format::kE4b15}) {
    if (name == fp8_format_name(f)) return f;
  }
  return std::nullopt;
}

namespace {
// The name, or the number of a value outside the enumeration.
std::string layout_text(LayoutKind k) {
  return k == LayoutKind::kSoA || k == LayoutKind::kAoS ? layout_name(k) : std::to_string(static_cast<int>(k));
}
std::string fp8_text(Fp8Format f) {
  return f == Fp8Format::kE4m3 || f == Fp8Format::kE4b15 ? fp8_format_name(f) : std::to_string(static_cast<int>(f));
}
}  // namespace

Status validate_format(const Format& f) {
  if (const char* problem = core::format_problem(f)) {
    return Status(StatusCode::kInvalidArgument, "format {key_bits = " + std::to_string(f.key_bits) +
                                                    ", value_bits = " + std::to_string(f.value_bits) +
                                                    ", head_dim = " + std::to_string(f.head_dim) +
                                                    ", norm_correction = " + (f.norm_correction ? "on" : "off") +
                                                    ", layout = " + layout_text(f.layout) +
                                                    ", fp8_format = " + fp8_text(f.fp8_format) +
                                                    "}: " + problem);
  }
  return Status();
}

Status validate_layout(const BlockLayout& l) {
  if (Status s = validate_format(l.format); !s.ok()) return s;
  if (const char* problem = core::layout_problem(l)) {
    return Status(StatusCode::kInvalidArgument, "layout {block_size = " + std::to_string(l.block_size) +
                                                    ", num_kv_heads = " + std::to_string(l.num_kv_heads) +
                                                    ", head_dim = " + std::to_string(l.format.head_dim) + "}: " +
                                                    problem);
  }
  return Status();
}

std::string describe(const Format& f) {
  std::string keys = f.fp8_keys() ? std::string("K fp8-") + fp8_format_name(f.fp8_format)
                                  : std::string("K") + std::to_string(f.key_bits) + " Lloyd-Max" +
                                        (f.norm_correction ? " (norm-corrected)" : "");
  return keys + ", V" + std::to_string(f.value_bits) + " uniform, head_dim " + std::to_string(f.head_dim) +
         (f.aos() ? ", AoS" : ", SoA");
}

}  // namespace turboquant
