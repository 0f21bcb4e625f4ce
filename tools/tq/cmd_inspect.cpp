// tq inspect: what is in a case's cache, in either layout (SoA or AoS, from
// meta.json). Which blocks and slots the block tables (up to seq_lens) and
// slot_mapping reference, per-KV-head ranges of the fp16 metadata (and, where
// the decode applies the norm correction, of the norm it multiplies by), FP8
// keys decoded in the case's flavour, code histograms, non-finite or
// zero-scale metadata, and non-zero bytes where nothing should have been
// written: in unreferenced slots and in padding (bytes no field owns).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "common.hpp"
#include "slot_map.hpp"
#include "turboquant/core/fp8.hpp"
#include "turboquant/core/pack.hpp"
#include "turboquant/core/token_codec.hpp"

namespace tq {
namespace {

namespace io = turboquant::io;
namespace core = turboquant::core;
using turboquant::BlockLayout;
using turboquant::MetaField;

struct InspectOptions {
  std::string case_dir;
  bool json = false;
};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  std::int64_t non_finite = 0;
  std::int64_t zero = 0;
  void add(double x) {
    if (!std::isfinite(x)) {
      ++non_finite;
      return;
    }
    lo = std::min(lo, x), hi = std::max(hi, x);
    zero += x == 0;
  }
  json to_json() const {
    return json{{"min", json_number(lo)}, {"max", json_number(hi)}, {"non_finite", non_finite}, {"zero", zero}};
  }
};

struct HeadStats {
  Range key_norm, value_scale, value_zero;
  Range key_norm_decoded;  // AoS Lloyd-Max keys: the stored norm divided by ||c|| (decode_key_norm)
  Range fp8_key;           // decoded FP8 key values
  std::int64_t fp8_at_limit = 0;  // FP8 keys at the flavour's largest stored magnitude (clipped by the store)
};

// The largest magnitude vLLM's store writes in each FP8 flavour: keys beyond
// it were clipped (e4m3 saturates at 448; e4b15 holds only |k| <= 1.75).
float fp8_store_limit(turboquant::Fp8Format f) {
  return f == turboquant::Fp8Format::kE4b15 ? core::kFp8E4b15Max : core::kFp8Max;
}

// The first bad metadata value, for the message.
struct Finding {
  std::int64_t count = 0;
  std::string first;
  void add(const std::string& where) {
    if (count++ == 0) first = where;
  }
};

// Referenced slots, from the block tables (up to seq_lens) and slot_mapping; checked like a decode.
std::vector<std::uint8_t> referenced_slots(const io::CaseDir& c, json* seqs, std::int64_t* from_tables,
                                           std::int64_t* from_mapping) {
  const BlockLayout& l = c.layout;
  const std::int64_t num_slots = c.num_blocks * l.block_size;
  std::vector<std::uint8_t> ref(static_cast<std::size_t>(num_slots), 0);
  *seqs = json::array();
  *from_tables = *from_mapping = 0;
  if (c.block_table.present != c.seq_lens.present) {
    fail(c.path, c.block_table.present ? "block_table.npy is present but seq_lens.npy is missing"
                                       : "seq_lens.npy is present but block_table.npy is missing");
  }
  const std::int64_t max_blocks = c.max_blocks_per_seq;
  for (std::int64_t b = 0; c.block_table.present && b < c.batch; ++b) {
    const std::int32_t len = c.seq_lens.values[b];
    const std::string at = "seq_lens[" + std::to_string(b) + "] = " + std::to_string(len);
    if (len < 0) fail(c.seq_lens.path, at + ": must be >= 0");
    const std::int64_t blocks = (std::int64_t{len} + l.block_size - 1) / l.block_size;
    if (blocks > max_blocks) {
      fail(c.seq_lens.path, at + " needs " + std::to_string(blocks) + " blocks of " + std::to_string(l.block_size) +
                                " tokens but block_table has " + std::to_string(max_blocks) + " per row");
    }
    json list = json::array();
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int32_t blk = c.block_table.values[b * max_blocks + j];
      if (blk < 0 || blk >= c.num_blocks) {
        fail(c.block_table.path, "block_table[" + std::to_string(b) + "][" + std::to_string(j) +
                                     "] = " + std::to_string(blk) + " is outside [0, " + std::to_string(c.num_blocks) +
                                     ") (num_blocks of kv_cache.npy)");
      }
      list.push_back(blk);
      const std::int64_t tokens = std::min<std::int64_t>(l.block_size, len - j * l.block_size);
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::uint8_t& r = ref[static_cast<std::size_t>(std::int64_t{blk} * l.block_size + t)];
        *from_tables += r == 0;
        r |= 1;
      }
    }
    seqs->push_back(json{{"sequence", b}, {"tokens", len}, {"blocks", list}});
  }
  for (std::size_t i = 0; c.slot_mapping.present && i < c.slot_mapping.size(); ++i) {
    const std::int64_t s = c.slot_mapping.values[i];
    if (s < 0) continue;
    if (s >= num_slots) {
      fail(c.slot_mapping.path, "slot_mapping[" + std::to_string(i) + "] = " + std::to_string(s) + " is outside [0, " +
                                    std::to_string(num_slots) + ") (num_blocks x block_size)");
    }
    *from_mapping += (ref[static_cast<std::size_t>(s)] & 2) == 0;
    ref[static_cast<std::size_t>(s)] |= 2;
  }
  // Neither source: every slot counts as referenced.
  if (!c.block_table.present && !c.slot_mapping.present) std::fill(ref.begin(), ref.end(), 3);
  return ref;
}

std::string hist_line(const std::vector<std::int64_t>& h) {
  std::int64_t total = 0;
  for (std::int64_t n : h) total += n;
  std::string s;
  for (std::size_t i = 0; i < h.size(); ++i) {
    s += fmt("%s%zu:%.1f%%", i ? " " : "", i, total ? 100.0 * static_cast<double>(h[i]) / total : 0.0);
  }
  return s;
}

// After the report: a cache whose referenced slots hold NaN/Inf metadata (or
// NaN FP8 keys) cannot decode to meaningful numbers, so inspect fails (exit 1)
// with one line on stderr. Stray bytes, zero scales and padding are reported only.
int verdict(const io::CaseDir& c, const Finding& non_finite) {
  if (non_finite.count == 0) return kExitOk;
  throw ToolError(kExitFailed, c.kv_cache.path + ": " + std::to_string(non_finite.count) +
                                   " non-finite metadata values in referenced slots (first: " + non_finite.first +
                                   "): this cache cannot decode to finite numbers");
}

int run_inspect(const InspectOptions& o) {
  io::CaseLoadOptions load = io::CaseLoadOptions::meta_only();
  load.kv_cache = io::Need::kRequired;
  load.block_table = load.seq_lens = load.slot_mapping = load.centroids = io::Need::kIfPresent;
  const io::CaseDir c = load_case(o.case_dir, load);
  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);
  const BlockLayout& l = c.layout;
  const auto& f = l.format;
  const std::uint8_t* cache = c.kv_cache.data();

  json seqs;
  std::int64_t from_tables = 0, from_mapping = 0;
  const std::vector<std::uint8_t> ref = referenced_slots(c, &seqs, &from_tables, &from_mapping);

  std::vector<HeadStats> heads(static_cast<std::size_t>(l.num_kv_heads));
  std::vector<std::int64_t> key_hist(f.fp8_keys() ? 0 : 1u << f.key_bits), value_hist(1u << f.value_bits);
  Finding non_finite, zero_scale, stray;
  std::int64_t referenced = 0, stray_bytes = 0, padding_nonzero = 0;
  std::vector<std::uint8_t> block_used(static_cast<std::size_t>(c.num_blocks), 0);
  const std::vector<std::uint8_t> owned = field_byte_map(l);  // 0: padding
  const std::int64_t padding_per_block = std::count(owned.begin(), owned.end(), std::uint8_t{0});
  const MetaField fields[] = {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero};
  std::vector<float> direction(static_cast<std::size_t>(f.head_dim));
  for (std::int64_t blk = 0; blk < c.num_blocks; ++blk) {
    const std::uint8_t* block = cache + l.block_base(blk);
    for (std::int64_t i = 0; i < l.block_bytes(); ++i) {
      padding_nonzero += owned[static_cast<std::size_t>(i)] == 0 && block[i] != 0;
    }
    for (int t = 0; t < l.block_size; ++t) {
      const bool used = ref[static_cast<std::size_t>(blk * l.block_size + t)] != 0;
      referenced += used;
      block_used[static_cast<std::size_t>(blk)] |= used;
      for (int h = 0; h < l.num_kv_heads; ++h) {
        const std::string where = fmt("block %lld slot %d head %d", static_cast<long long>(blk), t, h);
        if (!used) {  // nothing should be there: count non-zero bytes of every field of the slot
          std::int64_t n = 0;
          for (const FieldRange& r : slot_fields(l, t, h)) {
            for (std::int64_t i = r.begin; i < r.end; ++i) n += block[i] != 0;
          }
          if (n > 0) stray.add(where);
          stray_bytes += n;
          continue;
        }
        HeadStats& hs = heads[static_cast<std::size_t>(h)];
        for (MetaField m : fields) {
          if (f.fp8_keys() && m == MetaField::kKeyNorm) continue;
          const double v = core::read_meta(l, block, t, h, m);
          Range& r =
              m == MetaField::kKeyNorm ? hs.key_norm : (m == MetaField::kValueScale ? hs.value_scale : hs.value_zero);
          r.add(v);
          const char* name =
              m == MetaField::kKeyNorm ? "key norm" : (m == MetaField::kValueScale ? "value scale" : "value zero");
          if (!std::isfinite(v)) non_finite.add(where + " " + name + " = " + fmt("%g", v));
          if (m == MetaField::kValueScale && v == 0) zero_scale.add(where);
        }
        if (f.norm_corrected_at_decode()) {
          core::decode_key_direction(l, block, t, h, *codebook, direction.data());
          hs.key_norm_decoded.add(core::decode_key_norm(l, block, t, h, direction.data()));
        }
        const std::uint8_t* keys = block + l.key_data_offset(t, h);
        const std::uint8_t* values = block + l.value_data_offset(t, h);
        for (int d = 0; d < f.head_dim; ++d) {
          if (f.fp8_keys()) {
            const float k = core::fp8_to_float(f.fp8_format, keys[d]);
            hs.fp8_key.add(k);
            hs.fp8_at_limit += std::fabs(k) >= fp8_store_limit(f.fp8_format);
            if (!std::isfinite(k)) non_finite.add(where + fmt(" fp8 key dim %d = nan", d));
          } else {
            ++key_hist[static_cast<std::size_t>(core::unpack_code(f.key_bits, keys, d))];
          }
          ++value_hist[static_cast<std::size_t>(core::unpack_code(f.value_bits, values, d))];
        }
      }
    }
  }
  std::int64_t blocks_referenced = 0;
  json unreferenced_blocks = json::array();
  for (std::int64_t b = 0; b < c.num_blocks; ++b) {
    blocks_referenced += block_used[static_cast<std::size_t>(b)];
    if (!block_used[static_cast<std::size_t>(b)]) unreferenced_blocks.push_back(b);
  }

  json head_json = json::array();
  for (int h = 0; h < l.num_kv_heads; ++h) {
    const HeadStats& hs = heads[static_cast<std::size_t>(h)];
    json j{{"head", h}, {"value_scale", hs.value_scale.to_json()}, {"value_zero", hs.value_zero.to_json()}};
    if (f.fp8_keys()) {
      j["fp8_key"] = hs.fp8_key.to_json();
      j["fp8_key"]["at_store_limit"] = hs.fp8_at_limit;
    } else {
      j["key_norm"] = hs.key_norm.to_json();
    }
    if (f.norm_corrected_at_decode()) j["key_norm_decoded"] = hs.key_norm_decoded.to_json();
    head_json.push_back(j);
  }
  if (o.json) {
    json j{{"case", c.path},
           {"preset", c.preset_name},
           {"num_blocks", c.num_blocks},
           {"block_bytes", l.block_bytes()},
           {"cache_bytes", c.kv_cache.size()},
           {"sequences", seqs},
           {"blocks_referenced", blocks_referenced},
           {"unreferenced_blocks", unreferenced_blocks},
           {"slots_referenced", referenced},
           {"slots_from_block_tables", from_tables},
           {"slots_from_slot_mapping", from_mapping},
           {"heads", head_json},
           {"key_code_histogram", key_hist},
           {"value_code_histogram", value_hist},
           {"non_finite_metadata", non_finite.count},
           {"zero_value_scales", zero_scale.count},
           {"nonzero_bytes_outside_referenced_slots", stray_bytes},
           {"slots_with_stray_bytes", stray.count},
           {"padding_bytes", padding_per_block * c.num_blocks},
           {"nonzero_padding_bytes", padding_nonzero}};
    add_format_names(j, f);
    print_json(j);
    return verdict(c, non_finite);
  }

  std::printf("case      %s\n", c.path.c_str());
  std::printf("format    %s: %s; block_size %d, Hk %d\n", c.preset_name.c_str(), turboquant::describe(f).c_str(),
              l.block_size, l.num_kv_heads);
  std::printf("layout    %s\n", l.aos() ? fmt("aos: slot (t, h) at (t * %d + h) * %lld in a block", l.num_kv_heads,
                                              static_cast<long long>(l.record_stride()))
                                              .c_str()
                                        : "soa: data region, then fp16 metadata region");
  std::printf("cache     %lld blocks x %lld bytes = %zu bytes\n", static_cast<long long>(c.num_blocks),
              static_cast<long long>(l.block_bytes()), c.kv_cache.size());
  for (const json& s : seqs) {
    std::string blocks;
    for (std::size_t i = 0; i < s["blocks"].size() && i < 12; ++i) blocks += (i ? " " : "") + s["blocks"][i].dump();
    if (s["blocks"].size() > 12) blocks += " ...";
    std::printf("sequence  %lld: %lld tokens in %zu blocks [%s]\n", s["sequence"].get<long long>(),
                s["tokens"].get<long long>(), s["blocks"].size(), blocks.c_str());
  }
  if (!c.block_table.present && !c.slot_mapping.present) {
    std::printf("          (no block_table/seq_lens or slot_mapping: every slot counts as referenced)\n");
  }
  std::printf("blocks    %lld of %lld referenced\n", static_cast<long long>(blocks_referenced),
              static_cast<long long>(c.num_blocks));
  std::printf("slots     %lld referenced (%lld by block tables up to seq_lens, %lld by slot_mapping)\n",
              static_cast<long long>(referenced), static_cast<long long>(from_tables),
              static_cast<long long>(from_mapping));
  // One column per field; AoS Lloyd-Max keys add the norm the decode multiplies by.
  const bool decoded_norm = f.norm_corrected_at_decode();
  std::printf("\nmetadata over referenced slots (fp16):\n  head  %-26s %s%-26s %s\n",
              f.fp8_keys() ? (std::string("fp8 key values (") + turboquant::fp8_format_name(f.fp8_format) + ")").c_str()
                           : (decoded_norm ? "key norm (stored, ||k||)" : "key norm"),
              decoded_norm ? fmt("%-26s ", "key norm / ||c|| (decoded)").c_str() : "", "value scale", "value zero");
  const auto rng = [](const Range& r) { return fmt("[%.5g, %.5g]", r.lo, r.hi); };
  std::int64_t fp8_at_limit = 0;
  for (int h = 0; h < l.num_kv_heads; ++h) {
    const HeadStats& hs = heads[static_cast<std::size_t>(h)];
    fp8_at_limit += hs.fp8_at_limit;
    std::printf("  %4d  %-26s %s%-26s %s\n", h, rng(f.fp8_keys() ? hs.fp8_key : hs.key_norm).c_str(),
                decoded_norm ? fmt("%-26s ", rng(hs.key_norm_decoded).c_str()).c_str() : "",
                rng(hs.value_scale).c_str(), rng(hs.value_zero).c_str());
  }
  if (f.fp8_keys()) {
    std::printf("fp8 keys at the store's limit (|k| = %g, clipped)  %lld\n", fp8_store_limit(f.fp8_format),
                static_cast<long long>(fp8_at_limit));
  }
  if (!f.fp8_keys()) std::printf("\nkey codes   (%d-bit) %s\n", f.key_bits, hist_line(key_hist).c_str());
  std::printf("%svalue codes (%d-bit) %s\n", f.fp8_keys() ? "\n" : "", f.value_bits, hist_line(value_hist).c_str());
  std::printf("\nnon-finite metadata         %lld%s\n", static_cast<long long>(non_finite.count),
              non_finite.count ? (" (first: " + non_finite.first + ")").c_str() : "");
  std::printf("zero value scales           %lld%s\n", static_cast<long long>(zero_scale.count),
              zero_scale.count ? (" (first: " + zero_scale.first + "; a constant value vector)").c_str() : "");
  std::printf("non-zero bytes outside referenced slots  %lld in %lld slot-heads%s\n",
              static_cast<long long>(stray_bytes), static_cast<long long>(stray.count),
              stray.count ? (" (first: " + stray.first + ")").c_str() : "");
  std::printf("non-zero padding bytes      %lld of %lld\n", static_cast<long long>(padding_nonzero),
              static_cast<long long>(padding_per_block * c.num_blocks));
  return verdict(c, non_finite);
}

}  // namespace

Command add_inspect(CLI::App& parent) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* app =
      parent.add_subcommand("inspect",
                            "What is in a case's cache (SoA or AoS, as meta.json says): blocks, metadata ranges, "
                            "FP8 keys, code histograms, stray and padding bytes. Exit 1 when referenced slots hold "
                            "non-finite metadata");
  add_case_argument(app, &o->case_dir, "meta.json, kv_cache; block_table, seq_lens, slot_mapping, centroids");
  app->add_flag("--json", o->json, "Print one JSON object");
  return Command{app, [o] { return run_inspect(*o); }};
}

}  // namespace tq
