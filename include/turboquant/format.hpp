// Formats, presets, layouts and sizes (docs/FORMAT.md). The definitions live
// in the dependency-free core layer (shared with the CUDA kernels); this header
// adds the host-side names and checks.
//
// A cache is described by a BlockLayout: a Format (preset bits, head_dim, the
// byte layout, the FP8 flavour) plus block_size and num_kv_heads. vLLM writes
// two byte layouts of the same [num_blocks, block_size, Hk, slot_bytes] uint8
// tensor, and the caller names which one it holds:
//
//   // vLLM 0.33 on an NVIDIA GPU (AoS), 4bit_nc, D 128, block 16, 8 KV heads:
//   BlockLayout aos{preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS), 16, 8};
//   aos.key_data_offset(5, 2) == 5628;  // slot (5, 2): (5 * 8 + 2) * 134
//   aos.meta_field_offset(5, 2, MetaField::kKeyNorm) == 5692;  // right after the codes
//
//   // vLLM on AMD MI355X (SoA): codes first, fp16 metadata in a region of its own.
//   BlockLayout soa{preset_format(Preset::k4BitNc, 128), 16, 8};
//   soa.key_data_offset(5, 2) == 5376;  // (5 * 8 + 2) * 128
//   soa.meta_field_offset(5, 2, MetaField::kKeyNorm) == 16586;  // 16384 + 2 * (6 * 16 + 5)
//
//   // k8v4 written on an A100 (FP8 keys in Triton's float8e4b15):
//   preset_format(Preset::kK8V4, 128, LayoutKind::kAoS, Fp8Format::kE4b15);
//
// Both layouts have the same block_bytes(); every backend reads and writes both.
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
