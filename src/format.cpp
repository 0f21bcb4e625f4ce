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

Status validate_format(const Format& f) {
  if (const char* problem = core::format_problem(f)) {
    return Status(StatusCode::kInvalidArgument, "format {key_bits = " + std::to_string(f.key_bits) +
                                                    ", value_bits = " + std::to_string(f.value_bits) +
                                                    ", head_dim = " + std::to_string(f.head_dim) +
                                                    ", norm_correction = " + (f.norm_correction ? "on" : "off") +
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
  std::string keys = f.fp8_keys() ? "K fp8-e4m3"
                                  : std::string("K") + std::to_string(f.key_bits) + " Lloyd-Max" +
                                        (f.norm_correction ? " (norm-corrected)" : "");
  return keys + ", V" + std::to_string(f.value_bits) + " uniform, head_dim " + std::to_string(f.head_dim);
}

}  // namespace turboquant
