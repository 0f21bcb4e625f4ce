// tq validate: is this output what the TurboQuant format says it should be?
// Decodes the case with the golden model and compares FILE (default
// expected_out.npy) against it; puts the float64 oracle over the dequantized
// cache (kernel error) and, when the case has the original K/V, float64
// attention on those (format error) beside it. Exit 0 when the relative L2
// error vs the golden output is <= rtol, else 1. The computation and the
// report's text are turboquant::check's validate_output / render_report; this
// file loads the case and prints. With --cache FILE it checks a store's cache
// instead (cmd_validate_cache.cpp). Multi-token cases (query_start_loc.npy,
// sinks.npy, "sliding_window") are compared row by row: T rows.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/check/case_inputs.hpp"
#include "turboquant/io/npy.hpp"
#include "validate_cache.hpp"

namespace tq {
namespace {

namespace io = turboquant::io;
namespace checks = turboquant::checks;

struct ValidateOptions {
  std::string case_dir;
  std::string output = "expected_out.npy";
  double rtol = 1e-3;
  bool json = false;
  bool output_given = false;  // --output on the command line
  std::string cache;  // --cache: check this cache instead of an output
  int max_report = 20;
};

// multi_row: the locations also name the query row ("row"), as the text does.
json comparison_json(const checks::Comparison& c, bool multi_row) {
  json j{{"rel_l2", json_number(c.rel_l2)},
         {"max_abs", json_number(c.max_abs)},
         {"max_abs_at", {{"sequence", c.max_seq}, {"head", c.max_head}, {"dim", c.max_dim}}},
         {"value_at_max", json_number(c.got_at_max)},
         {"reference_at_max", json_number(c.want_at_max)},
         {"cosine", json_number(c.cosine)},
         {"worst_head", {{"sequence", c.worst_seq}, {"head", c.worst_head}, {"rel_l2", json_number(c.worst_rel_l2)}}},
         {"non_finite", c.non_finite}};
  if (multi_row) {
    j["max_abs_at"]["row"] = c.max_row;
    j["worst_head"]["row"] = c.worst_row;
  }
  return j;
}

int run_validate(const ValidateOptions& o) {
  if (!(o.rtol >= 0) || !std::isfinite(o.rtol)) fail("--rtol", fmt("%g must be a finite number >= 0", o.rtol));
  io::CaseLoadOptions load = io::CaseLoadOptions::decode();
  load.expected_out = load.expected_lse = io::Need::kSkip;  // the output under test is loaded below
  load.rows_sinks_window = true;                            // T rows: validate_output takes query_start_loc etc.
  const io::CaseDir c = load_case(o.case_dir, load);
  if (!o.output_given && !std::filesystem::exists(c.file(o.output))) {
    fail("--output", "the case has no " + o.output + " (" + c.file(o.output) +
                         "): give the output to check with --output FILE");
  }
  io::CaseArray<float> output;
  ensure(io::load_case_output(c, o.output, &output));

  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);
  checks::ValidationInputs in = checks::case_validation_inputs(
      c, codebook.get(), output.values, std::filesystem::path(output.path).filename().string());
  in.rtol = o.rtol;
  in.threads = hardware_threads();
  checks::ValidationReport report;
  if (Status s = checks::validate_output(in, &report); !s.ok()) ensure(s, case_file_for_message(c, s.message()));
  const int exit_code = report.pass ? kExitOk : kExitFailed;

  if (o.json) {
    json j{{"case", c.path},
           {"preset", c.preset_name},
           {"output", output.path},
           {"rtol", o.rtol},
           {"pass", report.pass},
           {"golden", "cpu-ref"},
           {"splits", c.num_kv_splits},
           {"seq_lens", c.seq_lens.values},
           {"f64_original_available", report.format_error_measured},
           {"f64_dequant_non_finite", report.oracle_non_finite}};
    add_format_names(j, c.format);
    if (!report.original_note.empty()) j["f64_original_note"] = report.original_note;
    if (report.multi_row) j["query_start_loc"] = c.query_start_loc.values;
    if (c.sinks.present) j["sinks"] = true;
    if (c.sliding_window != 0) j["sliding_window"] = c.sliding_window;
    for (const checks::ValidationRow& r : report.rows) j[r.key] = comparison_json(r.cmp, report.multi_row);
    print_json(j);
    return exit_code;
  }

  std::printf("case     %s\n", c.path.c_str());
  std::fputs(checks::render_decode_header(in, c.preset_name).c_str(), stdout);
  std::printf("output   %s %s\n\n", output.path.c_str(), io::format_shape(output.shape).c_str());
  std::fputs(checks::render_report(report).c_str(), stdout);
  return exit_code;
}

}  // namespace

Command add_validate(CLI::App& parent) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app =
      parent.add_subcommand("validate",
                            "Compare a decode output with the golden model and float64 oracles (the case's layout "
                            "and FP8 flavour from meta.json)");
  add_case_argument(app, &o->case_dir, "meta.json, query, kv_cache, block_table, seq_lens; with --cache: keys, values, slot_mapping");
  app->add_option("--output", o->output, "Output to check: a path, or a file name in CASE; float [T, Hq, D]")
      ->capture_default_str()
      ->check(non_empty_path())
      ->each([o](const std::string&) { o->output_given = true; });
  app->add_option("--rtol", o->rtol, "Pass when rel L2 vs golden <= rtol")->capture_default_str();
  app->add_flag("--json", o->json, "Print one JSON object");
  app->add_option("--cache", o->cache,
                  "Check a cache a store kernel wrote instead of an output: a path, or a file name in CASE; uint8 "
                  "like kv_cache.npy, against the golden store of keys, values, slot_mapping")
      ->check(non_empty_path());
  app->add_option("--max-report", o->max_report, "With --cache: wrong elements listed")
      ->capture_default_str()
      ->transform(int32_value());
  return Command{app, [o, app] {
                   if (app->count("--cache") == 0) {
                     if (app->count("--max-report") > 0) fail("--max-report", "needs --cache");
                     return run_validate(*o);
                   }
                   for (const char* other : {"--output", "--rtol"}) {
                     if (app->count(other) > 0) fail(other, "cannot be combined with --cache");
                   }
                   return run_validate_cache({o->case_dir, o->cache, o->max_report, o->json});
                 }};
}

}  // namespace tq
