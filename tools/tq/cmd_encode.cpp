// tq encode: a case's keys, values and slot_mapping -> a paged cache (.npy of
// the case's kv_cache shape), and how many bytes and codes agree with the
// case's kv_cache.npy when it has one.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/core/pack.hpp"
#include "turboquant/io/npy.hpp"

namespace tq {
namespace {

namespace io = turboquant::io;
using turboquant::BlockLayout;
using turboquant::MetaField;

using EncodeOptions = CaseRunOptions;

struct Agreement {
  std::int64_t bytes = 0, bytes_equal = 0;
  std::int64_t key_codes = 0, key_codes_equal = 0;
  std::int64_t value_codes = 0, value_codes_equal = 0;
  std::int64_t meta_fields = 0, meta_fields_equal = 0;
  std::int64_t token_heads = 0, token_heads_identical = 0;
};

Agreement agreement(const BlockLayout& l, const std::vector<std::uint8_t>& ours,
                    const std::vector<std::uint8_t>& theirs, std::span<const std::int64_t> slots) {
  Agreement a;
  a.bytes = static_cast<std::int64_t>(ours.size());
  for (std::size_t i = 0; i < ours.size(); ++i) a.bytes_equal += ours[i] == theirs[i];
  const auto& f = l.format;
  for (std::int64_t slot : slots) {
    if (slot < 0) continue;
    const std::int64_t base = l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      bool same = true;
      const std::uint8_t* ka = ours.data() + base + l.key_data_offset(t, h);
      const std::uint8_t* kb = theirs.data() + base + l.key_data_offset(t, h);
      const std::uint8_t* va = ours.data() + base + l.value_data_offset(t, h);
      const std::uint8_t* vb = theirs.data() + base + l.value_data_offset(t, h);
      for (int d = 0; d < f.head_dim; ++d) {
        const bool k = f.fp8_keys() ? ka[d] == kb[d]
                                    : turboquant::core::unpack_code(f.key_bits, ka, d) ==
                                          turboquant::core::unpack_code(f.key_bits, kb, d);
        const bool v =
            turboquant::core::unpack_code(f.value_bits, va, d) == turboquant::core::unpack_code(f.value_bits, vb, d);
        a.key_codes_equal += k;
        a.value_codes_equal += v;
        same &= k && v;
      }
      a.key_codes += f.head_dim;
      a.value_codes += f.head_dim;
      for (MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
        if (f.fp8_keys() && m == MetaField::kKeyNorm) continue;
        const std::int64_t at = base + l.meta_field_offset(t, h, m);
        const bool eq = std::memcmp(ours.data() + at, theirs.data() + at, 2) == 0;
        a.meta_fields += 1;
        a.meta_fields_equal += eq;
        same &= eq;
      }
      a.token_heads += 1;
      a.token_heads_identical += same;
    }
  }
  return a;
}

double ratio(std::int64_t num, std::int64_t den) { return den > 0 ? static_cast<double>(num) / den : 1.0; }

int run_encode(const EncodeOptions& o) {
  io::CaseLoadOptions load = io::CaseLoadOptions::encode();
  load.block_table = io::Need::kIfPresent;
  const io::CaseDir c = load_case(o.case_dir, load);
  const BlockLayout& l = c.layout;
  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);

  // The cache to write: the case's shape, else just enough blocks for the slots and the block table.
  std::vector<std::int64_t> shape;
  std::int64_t num_blocks = 0;
  if (c.kv_cache.present) {
    shape = c.kv_cache.shape;
    num_blocks = c.num_blocks;
  } else {
    for (std::int64_t s : c.slot_mapping.values) num_blocks = std::max(num_blocks, s / l.block_size + 1);
    for (std::int32_t b : c.block_table.values) num_blocks = std::max<std::int64_t>(num_blocks, std::int64_t{b} + 1);
    num_blocks = std::max<std::int64_t>(num_blocks, 1);
    constexpr std::int64_t kMaxCacheBytes = std::int64_t{1} << 36;
    if (num_blocks > kMaxCacheBytes / l.block_bytes()) {
      fail(c.slot_mapping.path, "slots up to block " + std::to_string(num_blocks - 1) + " need a cache of " +
                                    std::to_string(num_blocks) + " blocks, more than the 64 GiB this tool allocates");
    }
    shape = {num_blocks, l.block_size, l.num_kv_heads, l.format.slot_bytes_aligned()};
  }
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(num_blocks * l.block_bytes()), 0);

  const turboquant::EncodeArgs e = turboquant::io::case_encode_args(c, codebook.get());
  const std::unique_ptr<Backend> backend = make_backend(o.backend);
  if (Status s = backend->encode(turboquant::CacheView{l, cache.data(), num_blocks}, e); !s.ok()) {
    ensure(s, case_file_for_message(c, s.message()));
  }
  if (!o.out.empty()) {
    ensure(io::write_npy(o.out, io::make_npy<std::uint8_t>(shape, cache)));
  }

  json j{{"case", c.path},
         {"preset", c.preset_name},
         {"backend", backend->name()},
         {"tokens", c.num_tokens},
         {"num_blocks", num_blocks},
         {"shape", shape},
         {"bytes", cache.size()},
         {"codebook", c.format.fp8_keys() ? "none (FP8 keys)" : (c.centroids.present ? "centroids.npy" : "vllm")}};
  add_format_names(j, c.format);
  if (!o.out.empty()) j["out"] = o.out;
  Agreement a;
  if (c.kv_cache.present) {
    a = agreement(l, cache, c.kv_cache.values, c.slot_mapping.values);
    j["compared_with"] = c.kv_cache.path;
    j["bytes_equal"] = a.bytes_equal;
    j["byte_agreement"] = ratio(a.bytes_equal, a.bytes);
    j["key_codes"] = a.key_codes;
    j["key_codes_equal"] = a.key_codes_equal;
    j["value_codes"] = a.value_codes;
    j["value_codes_equal"] = a.value_codes_equal;
    j["meta_fields"] = a.meta_fields;
    j["meta_fields_equal"] = a.meta_fields_equal;
    j["token_heads"] = a.token_heads;
    j["token_heads_identical"] = a.token_heads_identical;
  }
  if (o.json) {
    print_json(j);
    return kExitOk;
  }
  std::printf("encoded %lld tokens x %d kv heads (%s, %s, %s) into %lld blocks, %zu bytes, backend %s\n",
              static_cast<long long>(c.num_tokens), l.num_kv_heads, c.preset_name.c_str(),
              turboquant::describe(c.format).c_str(),
              j["codebook"].get<std::string>().c_str(), static_cast<long long>(num_blocks), cache.size(),
              backend->name().c_str());
  if (!o.out.empty()) std::printf("wrote %s %s uint8\n", o.out.c_str(), io::format_shape(shape).c_str());
  if (c.kv_cache.present) {
    const auto row = [](const char* what, std::int64_t eq, std::int64_t all) {
      std::printf("  %-22s %12lld of %12lld agree (%.4f%%)\n", what, static_cast<long long>(eq),
                  static_cast<long long>(all), 100.0 * ratio(eq, all));
    };
    std::printf("vs %s:\n", c.kv_cache.path.c_str());
    row("bytes", a.bytes_equal, a.bytes);
    row(c.format.fp8_keys() ? "key bytes (fp8)" : "key codes", a.key_codes_equal, a.key_codes);
    row("value codes", a.value_codes_equal, a.value_codes);
    row("metadata fields (fp16)", a.meta_fields_equal, a.meta_fields);
    row("token-heads identical", a.token_heads_identical, a.token_heads);
  }
  return kExitOk;
}

}  // namespace

Command add_encode(CLI::App& parent) {
  return case_run_command(parent,
                          {"encode",
                           "Encode a case's keys/values/slot_mapping into a cache (the layout and FP8 flavour of its "
                           "meta.json)",
                           "meta.json, keys.npy, values.npy, slot_mapping.npy",
                           "Write the cache here (.npy uint8, the shape of the case's kv_cache)"},
                          [](CLI::App*, EncodeOptions*) {}, run_encode);
}

}  // namespace tq
