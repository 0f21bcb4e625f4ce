// What a TurboQuant cache stores per (token, KV head): the presets, custom
// formats and their sizes (facts §a, §b). Everything here is constexpr so that
// the canonical sizes are checked at compile time (see static_asserts below).
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

enum class Preset : std::uint8_t { kK8V4, k4BitNc, kK3V4Nc, k3BitNc };
inline constexpr Preset kAllPresets[] = {Preset::kK8V4, Preset::k4BitNc, Preset::kK3V4Nc, Preset::k3BitNc};

inline constexpr int kFp8KeyBits = 8;  // key_bits == 8 means FP8 e4m3 keys, no rotation
inline constexpr int kMaxCodebookSize = 16;
inline constexpr int kLaneCount = 16;  // the contract's reduction width (ARITHMETIC.md)
inline constexpr int kMaxHeadDim = 512;

// Metadata fields, in the order they appear in the fp16 metadata region.
enum class MetaField : std::uint8_t { kKeyNorm, kValueScale, kValueZero };

struct Format {
  int key_bits = 4;    // 3 or 4: Lloyd-Max codes of the rotated direction; 8: FP8 e4m3
  int value_bits = 4;  // 3 or 4: uniform codes with an fp16 scale and zero
  bool norm_correction = true;  // the stored key norm is divided by ||c[idx]|| (facts §d.3)
  int head_dim = 128;

  TQ_HD constexpr bool fp8_keys() const { return key_bits == kFp8KeyBits; }
  TQ_HD constexpr int key_data_bytes() const { return fp8_keys() ? head_dim : (head_dim * key_bits + 7) / 8; }
  TQ_HD constexpr int value_data_bytes() const { return (head_dim * value_bits + 7) / 8; }
  TQ_HD constexpr int data_bytes() const { return key_data_bytes() + value_data_bytes(); }
  // MSE keys: key norm, value scale, value zero. FP8 keys: value scale, value zero.
  TQ_HD constexpr int meta_fields() const { return fp8_keys() ? 2 : 3; }
  TQ_HD constexpr int meta_bytes() const { return 2 * meta_fields(); }
  TQ_HD constexpr int slot_bytes() const { return data_bytes() + meta_bytes(); }
  TQ_HD constexpr int slot_bytes_aligned() const { return (slot_bytes() + 1) / 2 * 2; }
  TQ_HD constexpr int field_index(MetaField f) const {
    return fp8_keys() ? static_cast<int>(f) - 1 : static_cast<int>(f);
  }
  TQ_HD constexpr int key_codebook_size() const { return fp8_keys() ? 0 : 1 << key_bits; }
  TQ_HD constexpr int value_levels() const { return (1 << value_bits) - 1; }
  // Uncompressed bf16 K and V take 4 bytes per dim per token-head.
  TQ_HD constexpr double compression_vs_bf16() const { return 4.0 * head_dim / slot_bytes_aligned(); }
};

TQ_HD constexpr bool operator==(const Format& a, const Format& b) {
  return a.key_bits == b.key_bits && a.value_bits == b.value_bits && a.norm_correction == b.norm_correction &&
         a.head_dim == b.head_dim;
}

TQ_HD constexpr Format preset_format(Preset p, int head_dim) {
  switch (p) {
    case Preset::kK8V4: return Format{kFp8KeyBits, 4, false, head_dim};
    case Preset::k4BitNc: return Format{4, 4, true, head_dim};
    case Preset::kK3V4Nc: return Format{3, 4, true, head_dim};
    case Preset::k3BitNc: return Format{3, 3, true, head_dim};
  }
  return Format{};
}

inline constexpr const char* preset_name(Preset p) {
  switch (p) {
    case Preset::kK8V4: return "turboquant_k8v4";
    case Preset::k4BitNc: return "turboquant_4bit_nc";
    case Preset::kK3V4Nc: return "turboquant_k3v4_nc";
    case Preset::k3BitNc: return "turboquant_3bit_nc";
  }
  return "?";
}

TQ_HD constexpr bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

// Why a format cannot be used, or nullptr. Lloyd-Max keys need a power-of-two
// head_dim (the Walsh-Hadamard rotation, facts §g); every head_dim must be a
// multiple of the 16-lane reduction width (ARITHMETIC.md), which also keeps
// 3-bit groups of 8 whole (facts §c).
inline constexpr const char* format_problem(const Format& f) {
  if (f.key_bits != 3 && f.key_bits != 4 && f.key_bits != kFp8KeyBits) return "key_bits must be 3, 4 or 8 (FP8)";
  if (f.value_bits != 3 && f.value_bits != 4) return "value_bits must be 3 or 4";
  if (f.head_dim < 32 || f.head_dim > kMaxHeadDim) return "head_dim must be in [32, 512]";
  if (f.head_dim % kLaneCount != 0) return "head_dim must be a multiple of 16";
  if (!f.fp8_keys() && !is_power_of_two(f.head_dim)) return "Lloyd-Max keys need a power-of-two head_dim";
  if (f.fp8_keys() && f.norm_correction) return "norm correction applies to Lloyd-Max keys only";
  return nullptr;
}

// The sizes of a format as kernels templated on its numbers see it:
// `constexpr Format f = make_format(D, KB, VB);` then f.data_bytes() etc.
// (norm correction changes no size).
TQ_HD constexpr Format make_format(int head_dim, int key_bits, int value_bits, bool norm_correction = false) {
  return Format{key_bits, value_bits, norm_correction, head_dim};
}

// The one list of (key bits, value bits) a valid format has (format_problem):
// calls fn.template operator()<KeyBits, ValueBits>() for f's pair, so a backend
// whose kernels are templated on the bits dispatches without a ladder of its own:
//   visit_bits(f, [&]<int KB, int VB>() { return kernel<KB, VB>(...); });
// A format format_problem rejects must not reach it (it takes the FP8 / 3-bit branch).
template <class Fn>
TQ_HD decltype(auto) visit_bits(const Format& f, Fn&& fn) {
  if (f.value_bits == 4) {
    if (f.key_bits == 4) return fn.template operator()<4, 4>();
    if (f.key_bits == 3) return fn.template operator()<3, 4>();
    return fn.template operator()<kFp8KeyBits, 4>();
  }
  if (f.key_bits == 4) return fn.template operator()<4, 3>();
  if (f.key_bits == 3) return fn.template operator()<3, 3>();
  return fn.template operator()<kFp8KeyBits, 3>();
}

// Canonical sizes (facts §b), frozen at compile time.
struct CanonicalSlot {
  Preset preset;
  int head_dim;
  int slot_bytes;
};
inline constexpr CanonicalSlot kCanonicalSlots[] = {
    {Preset::k4BitNc, 128, 134}, {Preset::kK3V4Nc, 128, 118}, {Preset::k3BitNc, 128, 102}, {Preset::kK8V4, 128, 196},
    {Preset::k4BitNc, 64, 70},   {Preset::kK3V4Nc, 64, 62},   {Preset::k3BitNc, 64, 54},   {Preset::kK8V4, 64, 100},
    {Preset::k4BitNc, 256, 262}, {Preset::kK3V4Nc, 256, 230}, {Preset::k3BitNc, 256, 198}, {Preset::kK8V4, 256, 388},
};
constexpr bool canonical_slots_hold() {
  for (const CanonicalSlot& c : kCanonicalSlots) {
    if (preset_format(c.preset, c.head_dim).slot_bytes() != c.slot_bytes) return false;
  }
  return true;
}
static_assert(canonical_slots_hold(), "a slot size differs from facts §b");

}  // namespace turboquant::core
