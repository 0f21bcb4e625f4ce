// tq decode: decode attention over a case's cache and query with one backend
// (the golden model by default); writes float32 out [T, Hq, D] and optionally
// the natural-log LSE [T, Hq] (T = B, or query_start_loc[B] for a multi-token case).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/check/validate.hpp"
#include "turboquant/io/npy.hpp"

namespace tq {
namespace {

namespace io = turboquant::io;

struct DecodeOptions : CaseRunOptions {
  std::string lse;
  int splits = 0;
  bool splits_given = false;  // else: the case's num_kv_splits
};

int run_decode(const DecodeOptions& o) {
  io::CaseLoadOptions load = io::CaseLoadOptions::decode();
  load.keys = load.values = load.slot_mapping = load.expected_out = load.expected_lse = load.reference_out_f64 =
      io::Need::kSkip;
  load.rows_sinks_window = true;  // case_decode_args passes query_start_loc, sinks, sliding_window on
  const io::CaseDir c = load_case(o.case_dir, load);
  const int splits = o.splits_given ? o.splits : c.num_kv_splits;
  if (splits < 1 || splits > 1024) fail("--splits", std::to_string(splits) + " must be in [1, 1024]");
  const std::unique_ptr<turboquant::Codebook> codebook = case_codebook(c);
  const std::unique_ptr<Backend> backend = make_backend(o.backend);

  std::vector<float> out, lse;
  const turboquant::DecodeArgs args = case_decode_args(c, codebook.get(), splits, &out, &lse);
  const auto start = std::chrono::steady_clock::now();
  if (Status s = backend->decode(case_cache(c), args); !s.ok()) ensure(s, case_file_for_message(c, s.message()));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  const std::vector<std::int64_t> out_shape{c.num_query_rows, c.num_q_heads, c.head_dim()};
  ensure(io::write_npy(o.out, io::make_npy<float>(out_shape, out)));
  if (!o.lse.empty()) ensure(io::write_npy(o.lse, io::make_npy<float>({c.num_query_rows, c.num_q_heads}, lse)));

  if (o.json) {
    json j{{"case", c.path},
           {"preset", c.preset_name},
           {"backend", backend->name()},
           {"isa", backend->isa()},
           {"threads", backend->threads()},
           {"splits", splits},
           {"out", o.out},
           {"shape", out_shape},
           {"decode_ms", ms}};
    add_format_names(j, c.format);
    if (!o.lse.empty()) j["lse"] = o.lse;
    print_json(j);
    return kExitOk;
  }
  std::printf("decoded %lld sequences x %d heads (%s, %s, seq_lens %s) with %s in %.2f ms, %d splits\n",
              static_cast<long long>(c.batch), c.num_q_heads, c.preset_name.c_str(),
              turboquant::describe(c.format).c_str(), turboquant::checks::join_ints(c.seq_lens.values).c_str(), backend->name().c_str(), ms,
              splits);
  std::printf("wrote %s %s float32\n", o.out.c_str(), io::format_shape(out_shape).c_str());
  if (!o.lse.empty())
    std::printf("wrote %s (%lld, %d) float32 (natural-log LSE)\n", o.lse.c_str(), static_cast<long long>(c.num_query_rows),
                c.num_q_heads);
  return kExitOk;
}

}  // namespace

Command add_decode(CLI::App& parent) {
  return case_run_command(
      parent,
      {"decode", "Decode attention over a case's cache (SoA or AoS, as its meta.json says) and query",
       "meta.json, query, kv_cache, block_table, seq_lens",
       "Output .npy, float32 [T, Hq, D]", /*out_required=*/true},
      [](CLI::App* app, DecodeOptions* o) {
        app->add_option("--lse", o->lse, "Also write the log-sum-exp, float32 [T, Hq] (natural log)")
            ->check(non_empty_path());
        app->add_option("--splits", o->splits, "KV splits per sequence (default: the case's num_kv_splits)")
            ->transform(int32_value())
            ->each([o](const std::string&) { o->splits_given = true; });
      },
      run_decode);
}

}  // namespace tq
