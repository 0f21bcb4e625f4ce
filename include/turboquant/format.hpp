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
using core::Fp8Format;
using core::LayoutKind;
using core::fp8_format_name;
using core::layout_name;
using core::MetaField;
using core::Preset;
using core::kAllPresets;
using core::preset_format;
using core::preset_name;

// "turboquant_4bit_nc" or the short "4bit_nc" -> Preset.
std::optional<Preset> preset_from_name(std::string_view name);
// "soa" / "aos" -> LayoutKind; "e4m3" / "e4b15" -> Fp8Format.
std::optional<LayoutKind> layout_from_name(std::string_view name);
std::optional<Fp8Format> fp8_format_from_name(std::string_view name);

// ok, or kInvalidArgument naming the field and its value.
Status validate_format(const Format& format);
Status validate_layout(const BlockLayout& layout);

// Human-readable description, e.g.
// "K4 Lloyd-Max (norm-corrected), V4 uniform, head_dim 128, SoA".
std::string describe(const Format& format);

}  // namespace turboquant
