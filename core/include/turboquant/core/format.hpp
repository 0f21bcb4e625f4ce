// What a TurboQuant cache stores per (token, KV head) and in which byte order:
// the presets, custom formats, the two layouts vLLM writes and their sizes
// (facts §a, §b). Everything here is constexpr so that the canonical sizes are
// checked at compile time (see static_asserts below). Where the bytes of a
// block sit is block_layout.hpp's job.
#pragma once

#include "turboquant/core/hd.hpp"

namespace turboquant::core {

enum class Preset : std::uint8_t { kK8V4, k4BitNc, kK3V4Nc, k3BitNc };
inline constexpr Preset kAllPresets[] = {Preset::kK8V4, Preset::k4BitNc, Preset::kK3V4Nc, Preset::k3BitNc};

inline constexpr int kFp8KeyBits = 8;  // key_bits == 8 means FP8 keys (fp8_format), no rotation
inline constexpr int kMaxCodebookSize = 16;
inline constexpr int kLaneCount = 16;  // the contract's reduction width (ARITHMETIC.md)
inline constexpr int kMaxHeadDim = 512;

// Metadata fields, in stored order (SoA: the order of the fp16 metadata
// region; AoS: the order inside a slot).
enum class MetaField : std::uint8_t { kKeyNorm, kValueScale, kValueZero };

// The two byte layouts of vLLM's TurboQuant cache (docs/FORMAT.md):
//   kSoA: per block, a data region [block_size][Hk][key codes | value codes]
//         then an fp16 metadata region [Hk][fields][block_size]; the stored
//         key norm has the norm correction folded in. Written by vLLM only
//         where FlyDSL runs (AMD gfx950, MI355X).
//   kAoS: plain C order [block_size][Hk][slot]; a slot is [key codes | key
//         norm | value codes | value scale | value zero]; the stored key norm
//         is the raw ||k|| and the decode applies the correction. Written by
//         vLLM 0.33 on every NVIDIA GPU.
enum class LayoutKind : std::uint8_t { kSoA, kAoS };

// How FP8 keys are encoded (Triton's names in brackets):
//   kE4m3:  e4m3fn, exponent bias 7, saturating at 448 [float8e4nv], what
//           vLLM writes on sm_89 and newer;
//   kE4b15: exponent bias 15, no inf/NaN, holds |k| <= 1.75 [float8e4b15],
//           what vLLM writes below sm_89 (A100).
enum class Fp8Format : std::uint8_t { kE4m3, kE4b15 };

struct Format {
  int key_bits = 4;    // 3 or 4: Lloyd-Max codes of the rotated direction; 8: FP8
  int value_bits = 4;  // 3 or 4: uniform codes with an fp16 scale and zero
  bool norm_correction = true;  // scores use ||k|| / ||c[idx]|| (facts §d.3); where: see below
  int head_dim = 128;
  LayoutKind layout = LayoutKind::kSoA;
  Fp8Format fp8_format = Fp8Format::kE4m3;  // FP8 keys only

  TQ_HD constexpr bool aos() const { return layout == LayoutKind::kAoS; }

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

  // The norm-correction convention of the layout: SoA stores ||k|| / ||c||
  // (folded at store), AoS stores ||k|| and the decode and the dequantize
  // divide by ||c|| (core::corrected_key_norm, one function for both).
  TQ_HD constexpr bool norm_folded_at_store() const { return norm_correction && !aos(); }
  TQ_HD constexpr bool norm_corrected_at_decode() const { return norm_correction && aos(); }

  // The bytes of one slot that lie together, as a kernel copies them:
  // SoA: key codes then value codes (the metadata lives in its own region);
  // AoS: the whole slot, metadata included.
  TQ_HD constexpr int record_bytes() const { return aos() ? slot_bytes() : data_bytes(); }
  // Where the value codes start in a record: SoA after the key codes; AoS
  // after the key (vLLM's key_packed_size: the codes and the fp16 norm).
  TQ_HD constexpr int value_record_offset() const {
    return aos() ? key_data_bytes() + (fp8_keys() ? 0 : 2) : key_data_bytes();
  }
  // AoS: where the stored metadata field i (stored order) sits in a slot: the
  // key norm right after the key codes, scale and zero after the value codes.
  TQ_HD constexpr int aos_meta_offset(int i) const {
    const int value_meta = value_record_offset() + value_data_bytes();
    if (fp8_keys()) return value_meta + 2 * i;
    return i == 0 ? key_data_bytes() : value_meta + 2 * (i - 1);
  }
  TQ_HD constexpr int key_codebook_size() const { return fp8_keys() ? 0 : 1 << key_bits; }
  TQ_HD constexpr int value_levels() const { return (1 << value_bits) - 1; }
  // Uncompressed bf16 K and V take 4 bytes per dim per token-head.
  TQ_HD constexpr double compression_vs_bf16() const { return 4.0 * head_dim / slot_bytes_aligned(); }
};

TQ_HD constexpr bool operator==(const Format& a, const Format& b) {
  return a.key_bits == b.key_bits && a.value_bits == b.value_bits && a.norm_correction == b.norm_correction &&
         a.head_dim == b.head_dim && a.layout == b.layout && a.fp8_format == b.fp8_format;
}

TQ_HD constexpr Format preset_format(Preset p, int head_dim, LayoutKind layout = LayoutKind::kSoA,
                                     Fp8Format fp8 = Fp8Format::kE4m3) {
  switch (p) {
    case Preset::kK8V4: return Format{kFp8KeyBits, 4, false, head_dim, layout, fp8};
    case Preset::k4BitNc: return Format{4, 4, true, head_dim, layout};
    case Preset::kK3V4Nc: return Format{3, 4, true, head_dim, layout};
    case Preset::k3BitNc: return Format{3, 3, true, head_dim, layout};
  }
  return Format{};
}

inline constexpr const char* layout_name(LayoutKind k) { return k == LayoutKind::kAoS ? "aos" : "soa"; }
inline constexpr const char* fp8_format_name(Fp8Format f) { return f == Fp8Format::kE4b15 ? "e4b15" : "e4m3"; }

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
  if (f.layout != LayoutKind::kSoA && f.layout != LayoutKind::kAoS) return "layout must be soa or aos";
  if (f.fp8_format != Fp8Format::kE4m3 && f.fp8_format != Fp8Format::kE4b15) return "fp8_format must be e4m3 or e4b15";
  if (!f.fp8_keys() && f.fp8_format != Fp8Format::kE4m3) return "fp8_format e4b15 applies to FP8 keys only";
  return nullptr;
}

// The sizes of a format as kernels templated on its numbers see it:
// `constexpr Format f = make_format(D, KB, VB, nc, layout);` then
// f.record_bytes() etc. (norm correction and the FP8 flavour change no size).
TQ_HD constexpr Format make_format(int head_dim, int key_bits, int value_bits, bool norm_correction = false,
                                   LayoutKind layout = LayoutKind::kSoA) {
  return Format{key_bits, value_bits, norm_correction, head_dim, layout};
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

// AoS slots are the same size; vLLM's key_packed_size (4bit_nc, D 128) is
// 64 + 2, and its value scale sits right after the value codes.
static_assert(preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS).value_record_offset() == 66);
static_assert(preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS).aos_meta_offset(1) == 130);
static_assert(preset_format(Preset::kK8V4, 128, LayoutKind::kAoS).aos_meta_offset(1) == 194);

}  // namespace turboquant::core
