// Formats, presets and sizes (docs/FORMAT.md). The definitions live in the
// dependency-free core layer (shared with the CUDA kernels); this header adds
// the host-side names and checks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "turboquant/core/block_layout.hpp"
#include "turboquant/status.hpp"

namespace turboquant {

using core::BlockLayout;
using core::Format;
using core::MetaField;
using core::Preset;
using core::kAllPresets;
using core::preset_format;
using core::preset_name;

// "turboquant_4bit_nc" or the short "4bit_nc" -> Preset.
std::optional<Preset> preset_from_name(std::string_view name);

// ok, or kInvalidArgument naming the field and its value.
Status validate_format(const Format& format);
Status validate_layout(const BlockLayout& layout);

// Human-readable description, e.g. "K4 (Lloyd-Max, norm-corrected) V4, D=128".
std::string describe(const Format& format);

}  // namespace turboquant
