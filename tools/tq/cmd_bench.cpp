// tq bench: a synthetic decode workload per preset and layout (default: all
// four presets in SoA on a Llama-like layer, Hq 32, Hk 8, D 128, 4 sequences x
// 8192 tokens; --layout soa,aos times both layouts on the same data). Reports
// encode throughput, the median decode time, the cache bytes read per second
// next to a memory-bandwidth probe measured in the same run, and the decode's
// error against float64 attention on the dequantized and the original K/V.
// --q-len, --sinks and --window bench multi-token rows, sinks and sliding
// windows; a backend that does not implement them reports "unsupported".
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/check/compare.hpp"
#include "turboquant/check/oracle.hpp"
#include "turboquant/decode.hpp"
#include "workload.hpp"

namespace tq {
namespace {

using turboquant::checks::compare;
using turboquant::checks::DenseKV;
using turboquant::checks::dequantized_kv;
using turboquant::checks::f64_attention_rows;
using turboquant::checks::last_token_rows;
using turboquant::checks::query_start_loc_rows;
using turboquant::checks::QueryRows;
using turboquant::checks::original_kv;
using turboquant::checks::sequence_slots;

struct BenchOptions {
  std::string presets = "all";
  std::string layouts = "soa";
  std::string fp8_format = "e4m3";
  WorkloadSpec spec;
  int splits = 32;
  int repeats = 0;  // 0: at least 3, more while they take under a second
  BackendRequest backend;
  bool json = false;
};

// float64 oracle work (multiply-adds) allowed before it runs on a subset of sequences.
constexpr double kOracleBudget = 3e8;

// "[=====>     ] step" on stderr, only on a terminal.
class Progress {
 public:
  explicit Progress(int total) : total_(total), on_(isatty(STDERR_FILENO) != 0) {}
  ~Progress() { done(); }
  void step(const std::string& what) {
    if (!on_) return;
    const int width = 24, filled = total_ ? width * count_ / total_ : width;
    std::fprintf(stderr, "\r[%s>%s] %-48s", std::string(static_cast<std::size_t>(filled), '=').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), what.c_str());
    std::fflush(stderr);
    ++count_;
  }
  void done() {
    if (on_) std::fprintf(stderr, "\r%80s\r", "");
    on_ = false;
  }

 private:
  int total_, count_ = 0;
  bool on_;
};

std::vector<turboquant::Preset> parse_presets(const std::string& list) {
  if (list == "all") return {std::begin(turboquant::kAllPresets), std::end(turboquant::kAllPresets)};
  std::vector<turboquant::Preset> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) out.push_back(parse_preset("--preset", name));
  if (out.empty()) fail("--preset", "\"" + list + "\" names no preset");
  return out;
}

std::vector<turboquant::LayoutKind> parse_layouts(const std::string& list) {
  std::vector<turboquant::LayoutKind> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const turboquant::LayoutKind k = parse_layout("--layout", name);
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  if (out.empty()) fail("--layout", "\"" + list + "\" names no layout (expected soa, aos or soa,aos)");
  return out;
}

// One row of the table: a preset in one layout.
struct BenchFormat {
  turboquant::Preset preset;
  turboquant::Format format;
};

std::vector<BenchFormat> bench_formats(const BenchOptions& o) {
  const std::vector<turboquant::Preset> presets = parse_presets(o.presets);
  const std::vector<turboquant::LayoutKind> layouts = parse_layouts(o.layouts);
  const turboquant::Fp8Format fp8 = parse_fp8_format("--fp8-format", o.fp8_format);
  std::vector<BenchFormat> out;
  for (turboquant::Preset p : presets) {
    for (turboquant::LayoutKind k : layouts) {
      // The FP8 flavour applies to FP8 keys only (preset_format gives it to k8v4 alone).
      out.push_back({p, turboquant::preset_format(p, o.spec.head_dim, k, fp8)});
    }
  }
  return out;
}

void check_spec(const BenchOptions& o) {
  const auto positive = [](const char* arg, int v, int lo, int hi) {
    if (v < lo || v > hi) fail(arg, fmt("%d must be in [%d, %d]", v, lo, hi));
  };
  positive("--batch", o.spec.batch, 1, 1 << 16);
  positive("--seq-len", o.spec.seq_len, 0, 1 << 24);
  positive("--kv-heads", o.spec.kv_heads, 1, 4096);
  positive("--q-heads", o.spec.q_heads, 1, 1 << 16);
  positive("--splits", o.splits, 1, 1024);
  positive("--repeats", o.repeats, 0, 1000);
  positive("--q-len", o.spec.q_len, 1, turboquant::kMaxQueryLen);
  positive("--window", o.spec.window, 0, 1 << 24);
  if (o.spec.q_len > o.spec.seq_len) {
    fail("--q-len", fmt("%d is more than --seq-len %d (a row's tokens are stored before it)", o.spec.q_len,
                        o.spec.seq_len));
  }
  if (o.spec.q_heads % o.spec.kv_heads != 0) {
    fail("--q-heads", fmt("%d is not a multiple of --kv-heads %d", o.spec.q_heads, o.spec.kv_heads));
  }
  const double bytes = 2.0 * o.spec.batch * o.spec.seq_len * o.spec.kv_heads * o.spec.head_dim * 4;
  if (bytes > 64e9) fail("--batch/--seq-len", fmt("the K/V of this workload would take %.0f GB", bytes / 1e9));
}

int run_bench(const BenchOptions& o) {
  const std::vector<BenchFormat> formats = bench_formats(o);
  check_spec(o);
  const WorkloadSpec& sp = o.spec;
  for (const BenchFormat& bf : formats) {
    const turboquant::BlockLayout l{bf.format, sp.block_size, sp.kv_heads};
    ensure(turboquant::validate_layout(l), std::string("--preset ") + turboquant::preset_name(bf.preset) +
                                               " --layout " + turboquant::layout_name(bf.format.layout));
  }
  const std::unique_ptr<Backend> backend = make_backend(o.backend);
  const int threads = hardware_threads();
  Progress progress(static_cast<int>(formats.size()) * 3 + 3);

  progress.step("memory bandwidth probe");
  const double probe = backend->probe_gbps();
  progress.step("random K/V and queries");
  const Workload w = make_workload(sp, threads);

  // The oracle's sequences: all of them, or as many as the budget allows.
  const double per_seq = static_cast<double>(sp.q_heads) * sp.q_len * sp.seq_len * sp.head_dim;
  const int oracle_seqs = std::clamp(static_cast<int>(kOracleBudget / std::max(per_seq, 1.0)), 1, sp.batch);
  std::vector<int> seqs(static_cast<std::size_t>(oracle_seqs));
  for (int i = 0; i < oracle_seqs; ++i) seqs[static_cast<std::size_t>(i)] = i;
  const std::string oracle_scope =
      oracle_seqs == sp.batch
          ? fmt("all %d sequences, all %d heads", sp.batch, sp.q_heads)
          : (oracle_seqs == 1 ? std::string("sequence 0") : fmt("sequences 0..%d", oracle_seqs - 1)) +
                fmt(" of %d, all %d heads", sp.batch, sp.q_heads);
  progress.step("f64 attention on the original K/V");
  std::vector<std::int64_t> offsets;
  const std::vector<std::int64_t> slots = sequence_slots(turboquant::BlockLayout{{}, sp.block_size, sp.kv_heads},
                                                         w.block_table, w.max_blocks, w.seq_lens, seqs, &offsets);
  DenseKV original;
  std::string why;
  original_kv(w.slots, w.keys, w.values, sp.kv_heads, sp.head_dim, slots, seqs, offsets, &original, &why);
  const QueryRows rows = w.query_start_loc.empty() ? last_token_rows(original)
                                                   : query_start_loc_rows(original, w.query_start_loc);
  const auto attention = [&](const DenseKV& kv) {
    return f64_attention_rows(kv, rows, w.query, sp.q_heads, 1.0 / std::sqrt(sp.head_dim), w.sinks, sp.window,
                              threads);
  };
  const std::vector<double> f64_original = attention(original);
  original = DenseKV{};
  const std::int64_t tokens_read =
      std::int64_t{sp.batch} * (sp.window > 0 ? std::min(sp.seq_len, sp.window + sp.q_len - 1) : sp.seq_len);

  json results = json::array();
  for (const BenchFormat& bf : formats) {
    const turboquant::Preset p = bf.preset;
    const std::string name =
        std::string(turboquant::preset_name(p)).substr(11) + " " + turboquant::layout_name(bf.format.layout);
    const turboquant::BlockLayout l{bf.format, sp.block_size, sp.kv_heads};
    std::vector<std::uint8_t> cache(static_cast<std::size_t>(w.num_blocks * l.block_bytes()), 0);

    progress.step(name + ": encode");
    turboquant::EncodeArgs e;
    e.keys = {w.keys.data(), w.keys.size() * 4};
    e.values = {w.values.data(), w.values.size() * 4};
    e.num_tokens = w.num_tokens;
    e.slot_mapping = {w.slots.data(), w.slots.size() * 8};
    double encode_ms = 0;
    ensure(backend->timed_encode(turboquant::CacheView{l, cache.data(), w.num_blocks}, e, &encode_ms),
           "encode " + name);
    const double encode_s = encode_ms * 1e-3;

    progress.step(name + ": decode");
    const float scale = 1.0f / std::sqrt(static_cast<float>(sp.head_dim));
    std::vector<float> out(w.query.size());
    turboquant::DecodeArgs a;
    a.query = {w.query.data(), w.query.size() * 4};
    a.batch = sp.batch;
    a.num_q_heads = sp.q_heads;
    a.block_table = {w.block_table.data(), w.block_table.size() * 4};
    a.max_blocks_per_seq = w.max_blocks;
    a.seq_lens = {w.seq_lens.data(), w.seq_lens.size() * 4};
    a.softmax_scale = scale;
    a.num_splits = o.splits;
    a.out = {out.data(), out.size() * 4};
    if (!w.query_start_loc.empty()) {
      a.query_start_loc = {w.query_start_loc.data(), w.query_start_loc.size() * 4};
      a.num_query_rows = w.query_start_loc.back();
    }
    a.sinks = {w.sinks.data(), w.sinks.size() * 4};
    a.sliding_window = sp.window;
    const turboquant::ConstCacheView view(l, cache.data(), w.num_blocks);
    std::vector<double> times;
    TimingPlan plan;
    if (o.repeats > 0) plan = TimingPlan{o.repeats, o.repeats, 0.0};
    json row{{"preset", turboquant::preset_name(p)},
             {"backend", backend->name()},
             {"isa", backend->isa()},
             {"threads", backend->threads()},
             {"batch", sp.batch},
             {"seq_len", sp.seq_len},
             {"q_heads", sp.q_heads},
             {"kv_heads", sp.kv_heads},
             {"head_dim", sp.head_dim},
             {"block_size", sp.block_size},
             {"splits", o.splits},
             {"q_len", sp.q_len},
             {"sinks", sp.sinks},
             {"window", sp.window},
             {"bytes_per_token_head", l.format.slot_bytes_aligned()},
             {"compression_vs_bf16", l.format.compression_vs_bf16()},
             {"encode_ms", encode_s * 1e3},
             {"encode_token_heads_per_s", json_number(static_cast<double>(w.num_tokens) * sp.kv_heads / encode_s)},
             {"probe_gbps", probe},
             {"oracle", oracle_scope}};
    add_format_names(row, l.format);
    const Status decoded = backend->timed_decode(view, a, plan, &times);
    if (decoded.code() == turboquant::StatusCode::kUnsupported) {
      // A backend without multi-token rows, sinks or windows: a row that says so, not an exit.
      row["unsupported"] = decoded.message();
      results.push_back(row);
      continue;
    }
    ensure(decoded, "decode " + name);
    std::sort(times.begin(), times.end());
    const double decode_ms = times[times.size() / 2];
    const double bytes_read = static_cast<double>(tokens_read) * sp.kv_heads * l.format.slot_bytes_aligned();

    progress.step(name + ": f64 attention on the dequantized K/V");
    DenseKV dq;
    ensure(dequantized_kv(view, nullptr, slots, seqs, offsets, threads, &dq), "dequantize");
    const std::vector<double> f64_dequant = attention(dq);
    // The decode's rows the oracle covers, in the oracle's order.
    const std::size_t row_size = static_cast<std::size_t>(sp.q_heads) * sp.head_dim;
    std::vector<double> got;
    got.reserve(rows.query_row.size() * row_size);
    for (const std::int64_t q : rows.query_row) {
      got.insert(got.end(), out.begin() + q * static_cast<std::int64_t>(row_size),
                 out.begin() + (q + 1) * static_cast<std::int64_t>(row_size));
    }
    row["decode_ms"] = decode_ms;
    row["decode_ms_min"] = times.front();
    row["decode_repeats"] = times.size();
    row["decode_bytes_read"] = bytes_read;
    row["decode_gbps"] = bytes_read / (decode_ms * 1e-3) / 1e9;
    row["rel_l2_vs_f64_dequant"] = json_number(compare(got, f64_dequant, sp.q_heads, sp.head_dim).rel_l2);
    row["rel_l2_vs_f64_original"] = json_number(compare(got, f64_original, sp.q_heads, sp.head_dim).rel_l2);
    results.push_back(row);
  }
  progress.done();

  if (o.json) {
    print_json(json{{"results", results}});
    return kExitOk;
  }
  std::string rows_text = sp.q_len > 1 ? fmt("; %d query rows per sequence", sp.q_len) : std::string();
  if (sp.sinks) rows_text += "; sinks";
  if (sp.window > 0) rows_text += fmt("; sliding window %d", sp.window);
  std::printf("tq bench: %d sequences x %d tokens, Hq %d, Hk %d, head_dim %d, block_size %d, %d splits%s\n", sp.batch,
              sp.seq_len, sp.q_heads, sp.kv_heads, sp.head_dim, sp.block_size, o.splits, rows_text.c_str());
  std::printf("backend %s (isa %s, %d thread%s); bandwidth probe %.1f GB/s (%s)\n", backend->name().c_str(),
              backend->isa().c_str(), backend->threads(), backend->threads() == 1 ? "" : "s", probe,
              backend->probe_name().c_str());
  std::printf("f64 oracle over %s; decode time = median of timed runs\n\n", oracle_scope.c_str());
  std::printf("%-9s %-9s %10s %8s %10s %13s %10s %9s %8s %12s %13s\n", "preset", "layout", "B/tok-head", "vs bf16",
              "encode ms", "tok-heads/s", "decode ms", "dec GB/s", "of probe", "err f64(dq)", "err f64(orig)");
  const auto num = [](const json& x) { return x.is_number() ? x.get<double>() : std::nan(""); };
  // "aos", or "aos/e4b15" for the FP8 flavour that is not the default.
  const auto layout_label = [](const json& r) {
    const bool other_fp8 = r.contains("fp8_format") && r["fp8_format"] != "e4m3";
    return r["layout"].get<std::string>() + (other_fp8 ? "/" + r["fp8_format"].get<std::string>() : "");
  };
  for (const json& r : results) {
    if (r.contains("unsupported")) {
      std::printf("%-9s %-9s %10d %7.2fx %10.1f %13.3e   unsupported by %s: %s\n",
                  r["preset"].get<std::string>().substr(11).c_str(), layout_label(r).c_str(),
                  r["bytes_per_token_head"].get<int>(), num(r["compression_vs_bf16"]), num(r["encode_ms"]),
                  num(r["encode_token_heads_per_s"]), backend->name().c_str(),
                  r["unsupported"].get<std::string>().c_str());
      continue;
    }
    std::printf("%-9s %-9s %10d %7.2fx %10.1f %13.3e %10.3f %9.2f %7.1f%% %12.2e %13.3e\n",
                r["preset"].get<std::string>().substr(11).c_str(), layout_label(r).c_str(),
                r["bytes_per_token_head"].get<int>(),
                num(r["compression_vs_bf16"]), num(r["encode_ms"]), num(r["encode_token_heads_per_s"]),
                num(r["decode_ms"]), num(r["decode_gbps"]), 100.0 * num(r["decode_gbps"]) / probe,
                num(r["rel_l2_vs_f64_dequant"]), num(r["rel_l2_vs_f64_original"]));
  }
  std::printf(
      "\nerr f64(dq): decode vs float64 attention over the dequantized cache (kernel error);\n"
      "err f64(orig): vs float64 attention over the original K/V (adds the format's quantization error).\n");
  return kExitOk;
}

}  // namespace

Command add_bench(CLI::App& parent) {
  auto o = std::make_shared<BenchOptions>();
  o->backend.name = default_backend_name();
  CLI::App* app =
      parent.add_subcommand("bench", "Synthetic decode benchmark: throughput and error per preset and layout");
  app->add_option("--preset", o->presets, "Presets, comma-separated, or all: " + preset_list())->capture_default_str();
  app->add_option("--layout", o->layouts,
                  "Cache layouts, comma-separated: soa, aos (what vLLM writes on NVIDIA) or soa,aos (both, on the "
                  "same data)")
      ->capture_default_str();
  app->add_option("--fp8-format", o->fp8_format,
                  "FP8 key encoding of k8v4: e4m3 or e4b15 (which clips |k| > 1.75, so its error vs the original "
                  "K/V is large on N(0, 1) keys)")
      ->capture_default_str();
  app->add_option("--batch", o->spec.batch, "Sequences")->transform(int32_value())->capture_default_str();
  app->add_option("--seq-len", o->spec.seq_len, "Tokens per sequence")->transform(int32_value())->capture_default_str();
  app->add_option("--q-heads", o->spec.q_heads, "Query heads")->transform(int32_value())->capture_default_str();
  app->add_option("--kv-heads", o->spec.kv_heads, "KV heads")->transform(int32_value())->capture_default_str();
  app->add_option("--head-dim", o->spec.head_dim, "Head dimension")->transform(int32_value())->capture_default_str();
  app->add_option("--block-size", o->spec.block_size, "Tokens per cache block")
      ->transform(int32_value())
      ->capture_default_str();
  app->add_option("--splits", o->splits, "KV splits per sequence")->transform(int32_value())->capture_default_str();
  app->add_option("--repeats", o->repeats, "Timed decodes (0: at least 3, up to about a second)")
      ->transform(int32_value())
      ->capture_default_str();
  app->add_option("--q-len", o->spec.q_len,
                  "Query rows per sequence (speculative verification; > 1: query_start_loc), at most 128")
      ->transform(int32_value())
      ->capture_default_str();
  app->add_flag("--sinks", o->spec.sinks, "Random attention sinks, one per query head");
  app->add_option("--window", o->spec.window, "Sliding window W (0: none)")
      ->transform(int32_value())
      ->capture_default_str();
  app->add_option("--seed", o->spec.seed, "Seed of the random data")->transform(uint64_value())->capture_default_str();
  add_backend_options(app, &o->backend);
  app->add_flag("--json", o->json, "Print one JSON object");
  return Command{app, [o] { return run_bench(*o); }};
}

}  // namespace tq
