// tq validate: is this output what the TurboQuant format says it should be?
// Decodes the case with the golden model and compares FILE (default
// expected_out.npy) against it; puts the float64 oracle over the dequantized
// cache (kernel error) and, when the case has the original K/V, float64
// attention on those (format error) beside it. Exit 0 when the relative L2
// error vs the golden output is <= rtol, else 1.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "backend.hpp"
#include "common.hpp"
#include "compare.hpp"
#include "oracle.hpp"
#include "turboquant/io/npy.hpp"

namespace tq {
namespace {

namespace io = turboquant::io;

struct ValidateOptions {
  std::string case_dir;
  std::string output = "expected_out.npy";
  double rtol = 1e-3;
  bool json = false;
};

struct Row {
  std::string name;  // "output vs golden"
  std::string key;   // JSON key
  Comparison cmp;
  std::string note;
};

void print_row(const Row& r) {
  const Comparison& c = r.cmp;
  std::printf("  %-37s %10.3e %10.3e %12.8f   seq %d head %d (%.3e)%s%s\n", r.name.c_str(), c.rel_l2, c.max_abs,
              c.cosine, c.worst_seq, c.worst_head, c.worst_rel_l2, r.note.empty() ? "" : "  ", r.note.c_str());
}

int run_validate(const ValidateOptions& o) {
  if (!(o.rtol >= 0) || !std::isfinite(o.rtol)) fail("--rtol", fmt("%g must be a finite number >= 0", o.rtol));
  io::CaseLoadOptions load = io::CaseLoadOptions::decode();
  load.expected_out = load.expected_lse = io::Need::kSkip;  // the output under test is loaded below
  const io::CaseDir c = load_case(o.case_dir, load);
  io::CaseArray<float> output;
  ensure(io::load_case_output(c, o.output, &output));
  const int Hq = c.num_q_heads, D = c.head_dim();
  const int threads = hardware_threads();

  // The golden model.
  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);
  std::vector<float> golden, golden_lse;
  const turboquant::DecodeArgs args = case_decode_args(c, codebook.get(), c.num_kv_splits, &golden, &golden_lse);
  if (Status s = turboquant::decode_reference(case_cache(c), args); !s.ok()) {
    ensure(s, case_file_for_message(c, s.message()));
  }

  // The float64 oracles.
  std::vector<int> all(static_cast<std::size_t>(c.batch));
  for (std::size_t b = 0; b < all.size(); ++b) all[b] = static_cast<int>(b);
  std::vector<std::int64_t> offsets;
  const std::vector<std::int64_t> slots = sequence_slots(
      c.layout, c.block_table.values, static_cast<int>(c.max_blocks_per_seq), c.seq_lens.values, all, &offsets);
  const DenseKV dequant = dequantized_kv(case_cache(c), codebook.get(), slots, all, offsets, threads);
  const std::vector<double> f64_dequant = f64_attention(dequant, c.query.values, Hq, c.scale, threads);
  std::optional<std::vector<double>> f64_original;
  std::string original_note;
  if (c.keys.present && c.values.present && c.slot_mapping.present) {
    DenseKV original;
    if (original_kv(c.slot_mapping.values, c.keys.values, c.values.values, c.num_kv_heads(), D, slots, all, offsets,
                    &original, &original_note)) {
      f64_original = f64_attention(original, c.query.values, Hq, c.scale, threads);
    }
  } else {
    original_note = "the case has no keys.npy/values.npy/slot_mapping.npy";
  }

  const std::vector<double> out = to_double(output.values), gold = to_double(golden);
  const std::string out_name = std::filesystem::path(output.path).filename().string();
  std::vector<Row> rows;
  rows.push_back({out_name + " vs golden", "vs_golden", compare(out, gold, Hq, D), "(kernel error)"});
  rows.push_back({out_name + " vs f64(dequantized)", "vs_f64_dequant", compare(out, f64_dequant, Hq, D), ""});
  rows.push_back({"golden vs f64(dequantized)", "golden_vs_f64_dequant", compare(gold, f64_dequant, Hq, D),
                  "(golden model's own rounding)"});
  if (f64_original) {
    rows.push_back({"f64(dequantized) vs f64(original)", "f64_dequant_vs_f64_original",
                    compare(f64_dequant, *f64_original, Hq, D), "(format error: the quantization itself)"});
    rows.push_back({out_name + " vs f64(original)", "vs_f64_original", compare(out, *f64_original, Hq, D), ""});
  }
  if (c.reference_out_f64.present) {
    rows.push_back({"f64(dequantized) vs reference_out_f64", "f64_dequant_vs_reference_out_f64",
                    compare(f64_dequant, c.reference_out_f64.values, Hq, D), "(the case's own f64 oracle)"});
  }
  const Comparison& vs_golden = rows[0].cmp;
  // Garbage in the cache (NaN/Inf metadata) shows up as non-finite oracle values.
  const std::int64_t oracle_non_finite =
      std::count_if(f64_dequant.begin(), f64_dequant.end(), [](double x) { return !std::isfinite(x); });
  const bool pass = vs_golden.rel_l2 <= o.rtol;  // NaN fails

  if (o.json) {
    json j{{"case", c.path},
           {"preset", c.preset_name},
           {"output", output.path},
           {"rtol", o.rtol},
           {"pass", pass},
           {"golden", "cpu-ref"},
           {"splits", c.num_kv_splits},
           {"seq_lens", c.seq_lens.values},
           {"f64_original_available", f64_original.has_value()},
           {"f64_dequant_non_finite", oracle_non_finite}};
    add_format_names(j, c.format);
    if (!original_note.empty()) j["f64_original_note"] = original_note;
    for (const Row& r : rows) j[r.key] = comparison_json(r.cmp);
    print_json(j);
    return pass ? kExitOk : kExitFailed;
  }

  std::printf("case     %s\n", c.path.c_str());
  std::printf("format   %s: %s; block_size %d, Hk %d, Hq %d\n", c.preset_name.c_str(),
              turboquant::describe(c.format).c_str(), c.block_size(), c.num_kv_heads(), Hq);
  std::printf("decode   %lld sequences, seq_lens %s; %d splits; scale %.9g; golden = cpu-ref\n",
              static_cast<long long>(c.batch), join_ints(c.seq_lens.values).c_str(), c.num_kv_splits, c.scale);
  std::printf("output   %s %s\n\n", output.path.c_str(), io::format_shape(output.shape).c_str());
  std::printf("  %-37s %10s %10s %12s   %s\n", "comparison", "rel L2", "max abs", "cosine", "worst head (rel L2)");
  for (const Row& r : rows) print_row(r);
  if (!f64_original) std::printf("  (format error not measured: %s)\n", original_note.c_str());
  std::printf("\n");
  if (vs_golden.non_finite > 0) {
    std::printf("%s has %lld non-finite values\n", out_name.c_str(), static_cast<long long>(vs_golden.non_finite));
  }
  if (oracle_non_finite > 0) {
    std::printf("the f64 oracle has %lld non-finite values: the cache holds non-finite metadata (see tq inspect)\n",
                static_cast<long long>(oracle_non_finite));
  }
  std::printf("max abs error vs golden at sequence %d, head %d, dim %d: %.9g (golden %.9g)\n", vs_golden.max_seq,
              vs_golden.max_head, vs_golden.max_dim, vs_golden.got_at_max, vs_golden.want_at_max);
  if (pass) {
    std::printf("PASS  %s: rel L2 vs golden %.3e <= rtol %.1e\n", out_name.c_str(), vs_golden.rel_l2, o.rtol);
    return kExitOk;
  }
  std::string why;
  const double format_error = f64_original ? rows[3].cmp.rel_l2 : NAN;
  if (std::isfinite(format_error) && format_error > 0 && std::isfinite(vs_golden.rel_l2)) {
    why = vs_golden.rel_l2 > format_error
              ? fmt("; the kernel error is %.1fx the format's own error (%.3e): the kernel is wrong, not the format",
                    vs_golden.rel_l2 / format_error, format_error)
              : fmt("; format error for comparison: %.3e", format_error);
  }
  std::printf("FAIL  %s: rel L2 vs golden %.3e > rtol %.1e; worst head: sequence %d, head %d (rel L2 %.3e)%s\n",
              out_name.c_str(), vs_golden.rel_l2, o.rtol, vs_golden.worst_seq, vs_golden.worst_head,
              vs_golden.worst_rel_l2, why.c_str());
  return kExitFailed;
}

}  // namespace

Command add_validate(CLI::App& parent) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app =
      parent.add_subcommand("validate",
                            "Compare a decode output with the golden model and float64 oracles (the case's layout "
                            "and FP8 flavour from meta.json)");
  add_case_argument(app, &o->case_dir, "meta.json, query, kv_cache, block_table, seq_lens");
  app->add_option("--output", o->output, "Output to check: a path, or a file name in CASE; float [B, Hq, D]")
      ->capture_default_str()
      ->check(non_empty_path());
  app->add_option("--rtol", o->rtol, "Pass when rel L2 vs golden <= rtol")->capture_default_str();
  app->add_flag("--json", o->json, "Print one JSON object");
  return Command{app, [o] { return run_validate(*o); }};
}

}  // namespace tq
