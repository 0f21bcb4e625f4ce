// The byte ranges of one (token slot, KV head) inside a block, by field, as
// BlockLayout places them in either layout: what tq info prints as the slot
// map and what tq inspect walks to find padding and stray bytes. Only
// BlockLayout's offset functions are used; nothing here knows a layout.
#pragma once

#include <cstdint>
#include <vector>

#include "turboquant/format.hpp"

namespace tq {

enum class SlotField : std::uint8_t { kKeyCodes, kKeyNorm, kValueCodes, kValueScale, kValueZero };

// "key codes", "key norm", ...; for FP8 keys kKeyCodes is "fp8 keys".
const char* slot_field_name(SlotField f, bool fp8_keys);
// "key_codes", "key_norm", ... (JSON keys).
const char* slot_field_key(SlotField f, bool fp8_keys);

struct FieldRange {
  SlotField field;
  std::int64_t begin, end;  // [begin, end) within the block
};

// The fields of slot t, head h in stored order (FP8 formats have no key norm).
std::vector<FieldRange> slot_fields(const turboquant::BlockLayout& l, int t, int h);

// Which bytes of a block belong to some field of some slot (1) and which are
// padding (0): block_bytes() entries, the same for every block.
std::vector<std::uint8_t> field_byte_map(const turboquant::BlockLayout& l);

}  // namespace tq
