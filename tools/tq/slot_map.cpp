#include "slot_map.hpp"

#include <algorithm>

namespace tq {

using turboquant::MetaField;

const char* slot_field_name(SlotField f, bool fp8_keys) {
  switch (f) {
    case SlotField::kKeyCodes: return fp8_keys ? "fp8 keys" : "key codes";
    case SlotField::kKeyNorm: return "key norm (fp16)";
    case SlotField::kValueCodes: return "value codes";
    case SlotField::kValueScale: return "value scale (fp16)";
    case SlotField::kValueZero: return "value zero (fp16)";
  }
  return "?";
}

const char* slot_field_key(SlotField f, bool fp8_keys) {
  switch (f) {
    case SlotField::kKeyCodes: return fp8_keys ? "fp8_keys" : "key_codes";
    case SlotField::kKeyNorm: return "key_norm";
    case SlotField::kValueCodes: return "value_codes";
    case SlotField::kValueScale: return "value_scale";
    case SlotField::kValueZero: return "value_zero";
  }
  return "?";
}

std::vector<FieldRange> slot_fields(const turboquant::BlockLayout& l, int t, int h) {
  const turboquant::Format& f = l.format;
  std::vector<FieldRange> out;
  const auto meta = [&](SlotField field, MetaField m) {
    const std::int64_t at = l.meta_field_offset(t, h, m);
    out.push_back({field, at, at + 2});
  };
  const std::int64_t key = l.key_data_offset(t, h), value = l.value_data_offset(t, h);
  out.push_back({SlotField::kKeyCodes, key, key + f.key_data_bytes()});
  if (!f.fp8_keys()) meta(SlotField::kKeyNorm, MetaField::kKeyNorm);
  out.push_back({SlotField::kValueCodes, value, value + f.value_data_bytes()});
  meta(SlotField::kValueScale, MetaField::kValueScale);
  meta(SlotField::kValueZero, MetaField::kValueZero);
  // Stored order: in SoA the metadata region follows the data region.
  std::sort(out.begin(), out.end(), [](const FieldRange& a, const FieldRange& b) { return a.begin < b.begin; });
  return out;
}

std::vector<std::uint8_t> field_byte_map(const turboquant::BlockLayout& l) {
  std::vector<std::uint8_t> map(static_cast<std::size_t>(l.block_bytes()), 0);
  for (int t = 0; t < l.block_size; ++t) {
    for (int h = 0; h < l.num_kv_heads; ++h) {
      for (const FieldRange& r : slot_fields(l, t, h)) {
        std::fill(map.begin() + r.begin, map.begin() + r.end, std::uint8_t{1});
      }
    }
  }
  return map;
}

}  // namespace tq
