// tq info: the sizes and offsets of one format and block layout (docs/FORMAT.md
// §2, §3, facts §b), in either layout: SoA's data and metadata regions, or
// AoS's slot map. Every number comes from core's Format and BlockLayout.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <memory>

#include "common.hpp"
#include "slot_map.hpp"

namespace tq {
namespace {

using turboquant::BlockLayout;
using turboquant::Format;
using turboquant::MetaField;

struct InfoOptions {
  std::string preset;
  std::string layout = "soa";
  std::string fp8_format = "e4m3";
  int head_dim = 0;
  int block_size = 16;
  int kv_heads = 1;
  int slot = 0;  // with has_slot: where one record lives
  int head = 0;
  std::int64_t block = 0;  // with has_block: where one block starts
  bool has_slot = false, has_block = false;
  bool json = false;
};

void line(const char* name, const std::string& value) { std::printf("%-22s %s\n", name, value.c_str()); }

std::string fp8_description(turboquant::Fp8Format f) {
  return f == turboquant::Fp8Format::kE4b15 ? "8 (FP8 e4b15: exponent bias 15, |k| <= 1.75, not rotated)"
                                            : "8 (FP8 e4m3fn, not rotated)";
}

// What the stored key norm holds (docs/FORMAT.md): the two layouts put the
// norm correction on different sides of the fp16 rounding.
const char* key_norm_convention(const Format& f) {
  if (f.fp8_keys()) return "none";
  if (f.norm_folded_at_store()) return "corrected";
  return "raw";
}

// The fields of the slot at (0, 0), which starts the block: offsets within a
// slot. The bytes after the last field, up to the slot stride, are padding.
json slot_map_json(const BlockLayout& l) {
  json fields = json::array();
  std::int64_t end = 0;
  for (const FieldRange& r : slot_fields(l, 0, 0)) {
    fields.push_back(json{{"field", slot_field_key(r.field, l.format.fp8_keys())}, {"begin", r.begin}, {"end", r.end}});
    end = r.end;
  }
  if (end < l.record_stride()) fields.push_back(json{{"field", "padding"}, {"begin", end}, {"end", l.record_stride()}});
  return fields;
}

int run_info(const InfoOptions& o) {
  const turboquant::Preset preset = parse_preset("--preset", o.preset);
  const Format f = turboquant::preset_format(preset, o.head_dim, parse_layout("--layout", o.layout),
                                             fp8_format_for(preset, "--fp8-format", o.fp8_format));
  const BlockLayout l{f, o.block_size, o.kv_heads};
  ensure(turboquant::validate_layout(l), "--preset " + o.preset + " --layout " + o.layout + " --head-dim " +
                                             std::to_string(o.head_dim) +
                                             " --block-size " + std::to_string(o.block_size) + " --kv-heads " +
                                             std::to_string(o.kv_heads));
  if (o.has_block) {
    if (o.block < 0) fail("--block", std::to_string(o.block) + " must be >= 0");
    // Block ids whose start would not fit a 64-bit byte offset.
    const std::int64_t max_block = std::numeric_limits<std::int64_t>::max() / l.block_bytes();
    if (o.block > max_block) {
      fail("--block", std::to_string(o.block) + " starts beyond 2^63 bytes (blocks of " +
                          std::to_string(l.block_bytes()) + " bytes: at most " + std::to_string(max_block) + ")");
    }
  }
  if (o.has_slot && (o.slot < 0 || o.slot >= l.block_size)) {
    fail("--slot", std::to_string(o.slot) + " is outside [0, " + std::to_string(l.block_size) + ") (block_size)");
  }
  if (o.head < 0 || o.head >= l.num_kv_heads) {
    fail("--head", std::to_string(o.head) + " is outside [0, " + std::to_string(l.num_kv_heads) + ") (kv heads)");
  }
  const std::int64_t meta_region = std::int64_t{2} * f.meta_fields() * l.block_size * l.num_kv_heads;
  const std::int64_t padding = l.block_bytes() - l.used_block_bytes();
  const char* field_names = f.fp8_keys() ? "value scale, value zero" : "key norm, value scale, value zero";

  json j{{"preset", turboquant::preset_name(preset)},
         {"description", turboquant::describe(f)},
         {"head_dim", f.head_dim},
         {"block_size", l.block_size},
         {"kv_heads", l.num_kv_heads},
         {"key_bits", f.key_bits},
         {"fp8_keys", f.fp8_keys()},
         {"value_bits", f.value_bits},
         {"norm_correction", f.norm_correction},
         {"key_norm_stored", key_norm_convention(f)},
         {"key_data_bytes", f.key_data_bytes()},
         {"value_data_bytes", f.value_data_bytes()},
         {"data_bytes", f.data_bytes()},
         {"meta_fields", f.meta_fields()},
         {"slot_bytes", f.slot_bytes()},
         {"slot_bytes_aligned", f.slot_bytes_aligned()},
         {"bytes_per_token_head", f.slot_bytes_aligned()},
         {"padding_bytes", padding},
         {"block_bytes", l.block_bytes()},
         {"compression_vs_bf16", f.compression_vs_bf16()}};
  add_format_names(j, f);
  // SoA: where the metadata region starts; AoS: what lies where inside a slot.
  if (l.aos()) {
    j["slot_stride"] = l.record_stride();
    j["slot_map"] = slot_map_json(l);
  } else {
    j["meta_offset"] = l.meta_offset();
    j["meta_region_bytes"] = meta_region;
  }
  if (o.has_slot) {
    const int t = o.slot, h = o.head;
    json rec{{"slot", t},
             {"head", h},
             {"key_bytes", {l.key_data_offset(t, h), l.key_data_offset(t, h) + f.key_data_bytes()}},
             {"value_bytes", {l.value_data_offset(t, h), l.value_data_offset(t, h) + f.value_data_bytes()}},
             {"value_scale_offset", l.meta_field_offset(t, h, MetaField::kValueScale)},
             {"value_zero_offset", l.meta_field_offset(t, h, MetaField::kValueZero)}};
    if (!f.fp8_keys()) rec["key_norm_offset"] = l.meta_field_offset(t, h, MetaField::kKeyNorm);
    j["record"] = rec;
  }
  if (o.has_block) j["block_offset"] = json{{"block", o.block}, {"offset", l.block_base(o.block)}};
  if (o.json) {
    print_json(j);
    return kExitOk;
  }

  line("preset", std::string(turboquant::preset_name(preset)) + " (" + turboquant::describe(f) + ")");
  line("layout", l.aos() ? "aos: [block_size][kv_heads][slot], one slot per token-head (vLLM on NVIDIA)"
                         : "soa: a data region, then an fp16 metadata region (vLLM with FlyDSL, AMD gfx950)");
  line("key bits", f.fp8_keys() ? fp8_description(f.fp8_format)
                                : std::to_string(f.key_bits) + " (Lloyd-Max, rotated)");
  line("value bits", std::to_string(f.value_bits) + " (uniform, fp16 scale and zero)");
  line("norm correction", !f.norm_correction      ? std::string("off")
                          : f.norm_folded_at_store() ? std::string("on, folded into the stored norm at store")
                                                     : std::string("on, applied at decode (stored norm = ||k||)"));
  line("key data bytes", std::to_string(f.key_data_bytes()));
  line("value data bytes", std::to_string(f.value_data_bytes()));
  line("meta fields", std::to_string(f.meta_fields()) + " x fp16 (" + field_names + ")");
  line("slot bytes", std::to_string(f.slot_bytes()) + " = " + std::to_string(f.key_data_bytes()) + " + " +
                         std::to_string(f.value_data_bytes()) + " + " + std::to_string(f.meta_bytes()) + " (aligned " +
                         std::to_string(f.slot_bytes_aligned()) + ")");
  line("bytes per token-head", std::to_string(f.slot_bytes_aligned()));
  line("compression vs bf16",
       fmt("%.2fx (%d / %d bytes)", f.compression_vs_bf16(), 4 * f.head_dim, f.slot_bytes_aligned()));
  line("block", "block_size " + std::to_string(l.block_size) + ", kv heads " + std::to_string(l.num_kv_heads));
  if (l.aos()) {
    line("slot (t, h) at", "(t * " + std::to_string(l.num_kv_heads) + " + h) * " + std::to_string(l.record_stride()));
    line("slot map", "bytes of one slot:");
    std::int64_t end = 0;
    for (const FieldRange& r : slot_fields(l, 0, 0)) {
      std::printf("  %-20s [%lld, %lld)\n", slot_field_name(r.field, f.fp8_keys()), static_cast<long long>(r.begin),
                  static_cast<long long>(r.end));
      end = r.end;
    }
    if (end < l.record_stride()) {
      std::printf("  %-20s [%lld, %lld)\n", "padding", static_cast<long long>(end),
                  static_cast<long long>(l.record_stride()));
    }
  } else {
    line("data region", "[0, " + std::to_string(l.meta_offset()) + ")  [block_size][kv_heads][" +
                            std::to_string(f.data_bytes()) + "]");
    line("meta offset", std::to_string(l.meta_offset()));
    line("meta region bytes",
         std::to_string(meta_region) + "  fp16 [kv_heads][" + std::to_string(f.meta_fields()) + "][block_size]");
  }
  line("padding bytes", std::to_string(padding));
  line("block bytes", std::to_string(l.block_bytes()));
  if (o.has_slot) {
    const json& r = j["record"];
    const std::string at = "slot " + std::to_string(o.slot) + ", head " + std::to_string(o.head);
    line("key bytes", at + ": [" + r["key_bytes"][0].dump() + ", " + r["key_bytes"][1].dump() + ")");
    line("value bytes", at + ": [" + r["value_bytes"][0].dump() + ", " + r["value_bytes"][1].dump() + ")");
    if (!f.fp8_keys()) line("key norm at", r["key_norm_offset"].dump());
    line("value scale at", r["value_scale_offset"].dump());
    line("value zero at", r["value_zero_offset"].dump());
  }
  if (o.has_block)
    line("block start", "block " + std::to_string(o.block) + " at byte " + std::to_string(l.block_base(o.block)));
  return kExitOk;
}

}  // namespace

Command add_info(CLI::App& parent) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* app =
      parent.add_subcommand("info", "Sizes and offsets of a format and block layout, SoA or AoS (docs/FORMAT.md)");
  app->add_option("--preset", o->preset, "Preset, full or short name: " + preset_list())->required();
  app->add_option("--head-dim", o->head_dim, "Head dimension D")->transform(int32_value())->required();
  app->add_option("--layout", o->layout,
                  "Cache layout: soa (data region + metadata region) or aos (token-major slots, what vLLM writes on "
                  "NVIDIA)")
      ->capture_default_str();
  app->add_option("--fp8-format", o->fp8_format,
                  "FP8 key encoding for k8v4: e4m3 (vLLM on sm_89 and newer) or e4b15 (below sm_89)")
      ->capture_default_str();
  app->add_option("--block-size", o->block_size, "Tokens per block")->transform(int32_value())->capture_default_str();
  app->add_option("--kv-heads", o->kv_heads, "KV heads per block (Hk)")
      ->transform(int32_value())
      ->capture_default_str();
  CLI::Option* slot = app->add_option("--slot", o->slot, "Also show where the record of this token slot lives")
                          ->transform(int32_value());
  app->add_option("--head", o->head, "KV head for --slot")
      ->transform(int32_value())
      ->capture_default_str()
      ->needs(slot);
  CLI::Option* block =
      app->add_option("--block", o->block, "Also show where this block starts")->transform(int64_value());
  app->add_flag("--json", o->json, "Print one JSON object");
  return Command{app, [o, slot, block] {
                   o->has_slot = slot->count() > 0;
                   o->has_block = block->count() > 0;
                   return run_info(*o);
                 }};
}

}  // namespace tq
