// bench_cpu: the CPU backend's numbers for issue 4 (docs/PERFORMANCE.md).
// Shape: D 128, Hq 32, Hk 8, block 16, shuffled block table; decode B=1 x
// 32768, B=4 x 8192, B=16 x 2048 tokens for every preset, 1 and 2 threads,
// and B=16 x 32768 (a 0.4-0.8 GB cache, beyond any last-level cache: the
// rows where DRAM latency and the lines each layout touches show);
// the scalar reference on the same shapes; encode of 4bit_nc. The SoA rows are
// named as before; the same decodes and encodes on the AoS layout (issue 12)
// are the rows starting "decode-aos/" and "encode-aos/". Every benchmark
// reports, besides its time: cache GB/s (bytes of the token-heads it reads or
// writes, records and metadata), the fraction of a memory-read bandwidth probe
// measured in this process with the same thread count, and ns per token-head
// (per KV head and token, all 4 query heads of the group served).
// Multi-token rows (issue 13, "decode-multi/"): B 4 x 8192 with q_len 4, 16,
// 128 query rows per sequence (and q_len 16 with a 1024-token window), and
// B 1 x 32768 with q_len 4, 16 (issue 13's CPU target: q_len 4 in at most 3x
// the time of q_len 1 at 2 threads),
// decoded as query_start_loc rows ("/rows") and as the same rows expanded to
// single-token rows with synthetic lengths ("/expanded", what vLLM does);
// x_single is the time over the single-token decode of the same cache
// ("/q1/single", run first).
//
//   bench_cpu [--benchmark_filter=decode/4bit_nc] [google benchmark flags]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bandwidth_probe.hpp"
#include "common/multi_problem.hpp"
#include "common/random_problem.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant::bench {
namespace {

constexpr int kHeadDim = 128;
constexpr int kKvHeads = 8;
constexpr int kGroup = 4;  // Hq 32
constexpr int kBlock = 16;

// "turboquant_4bit_nc" -> "4bit_nc".
std::string short_name(Preset p) {
  const std::string name = preset_name(p);
  const std::string prefix = "turboquant_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// Caches are built once per (preset, layout, batch, seq_len) and shared by benchmarks.
const testing::Problem& problem(Preset preset, LayoutKind layout, int batch, int seq_len, bool keep_inputs = false) {
  static std::map<std::tuple<int, int, int, int>, std::unique_ptr<testing::Problem>> cache;
  auto& slot = cache[{static_cast<int>(preset), static_cast<int>(layout), batch, seq_len}];
  if (!slot || (keep_inputs && slot->keys.empty())) {
    testing::ProblemSpec spec;
    spec.format = preset_format(preset, kHeadDim, layout);
    spec.block_size = kBlock;
    spec.num_kv_heads = kKvHeads;
    spec.group = kGroup;
    spec.seq_lens.assign(batch, seq_len);
    spec.seed = 42;
    slot = std::make_unique<testing::Problem>(testing::make_problem(spec));
    if (!keep_inputs) {  // decode needs only the cache and the queries
      slot->keys = {};
      slot->values = {};
    }
  }
  return *slot;
}

// Time per iteration measured here (wall clock), reported as counters.
void report(benchmark::State& st, double seconds, double bytes, double token_heads, int threads) {
  const double per_iter = seconds / static_cast<double>(st.iterations());
  const double gbps = bytes / per_iter / 1e9;
  const double probe = read_bandwidth_gbps(threads);
  st.counters["ms"] = per_iter * 1e3;
  st.counters["cache_GBps"] = gbps;
  st.counters["probe_GBps"] = probe;
  st.counters["frac_probe"] = gbps / probe;
  st.counters["ns_per_token_head"] = per_iter * 1e9 / token_heads;
}

// isa: "" = the best, "reference" = decode_reference (single thread).
void decode(benchmark::State& st, Preset preset, LayoutKind layout, int batch, int seq_len, int threads,
            std::string isa) {
  const testing::Problem& p = problem(preset, layout, batch, seq_len);
  std::vector<float> out, lse;
  const DecodeArgs a = p.args(out, lse);
  const CpuOptions opt{threads, isa};
  double seconds = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = isa == "reference" ? decode_reference(p.view(), a) : decode_cpu(p.view(), a, opt);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) st.SkipWithError(s.to_string().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  const double token_heads = double(batch) * seq_len * kKvHeads;
  report(st, seconds, token_heads * p.layout.format.slot_bytes(), token_heads, isa == "reference" ? 1 : threads);
}

// Encode of `tokens` tokens x Hk heads (K/V of `dtype` in, a cache slot each).
void encode(benchmark::State& st, Preset preset, LayoutKind layout, int tokens, DType dtype, int threads,
            std::string isa) {
  const testing::Problem& p = problem(preset, layout, 1, tokens, /*keep_inputs=*/true);
  std::vector<std::uint8_t> cache = p.cache;
  const std::vector<std::uint8_t> keys = testing::as_dtype_bytes(p.keys, dtype);
  const std::vector<std::uint8_t> values = testing::as_dtype_bytes(p.values, dtype);
  EncodeArgs e;
  e.keys = {keys.data(), keys.size()};
  e.values = {values.data(), values.size()};
  e.dtype = dtype;
  e.num_tokens = static_cast<std::int64_t>(p.slots.size());
  e.slot_mapping = {p.slots.data(), p.slots.size() * 8};
  e.check_finite = false;  // measure the store, not the input scan
  const CacheView view{p.layout, cache.data(), p.num_blocks};
  double seconds = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = isa == "reference" ? encode_reference(view, e) : encode_cpu(view, e, CpuOptions{threads, isa});
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) st.SkipWithError(s.to_string().c_str());
    benchmark::DoNotOptimize(cache.data());
  }
  const double token_heads = double(tokens) * kKvHeads;
  // Bytes moved: K and V read, the slot written.
  const double bytes = token_heads * (2.0 * dtype_size(dtype) * kHeadDim + p.layout.format.slot_bytes());
  report(st, seconds, bytes, token_heads, isa == "reference" ? 1 : threads);
  st.counters["Mtoken_heads_per_s"] = token_heads / (seconds / static_cast<double>(st.iterations())) / 1e6;
}

// Registers a wall-clock benchmark reported in milliseconds.
template <class Fn>
benchmark::internal::Benchmark* reg(const std::string& name, Fn fn) {
  return benchmark::RegisterBenchmark(name.c_str(), fn)->UseRealTime()->Unit(benchmark::kMillisecond);
}

// ---- multi-token rows ------------------------------------------------------

// problem()'s 4bit_nc cache of `batch` x `seq_len` tokens with q_len query
// rows per sequence (one copy of the cache per (q_len, window)).
const testing::MultiProblem& multi_problem(int batch, int seq_len, int q_len, int window) {
  static std::map<std::tuple<int, int, int, int>, std::unique_ptr<testing::MultiProblem>> cache;
  auto& slot = cache[{batch, seq_len, q_len, window}];
  if (!slot) {
    const testing::Problem& p = problem(Preset::k4BitNc, LayoutKind::kSoA, batch, seq_len);
    testing::MultiSpec spec;
    spec.base = p.spec;
    spec.q_lens.assign(batch, q_len);
    spec.window = window;
    slot = std::make_unique<testing::MultiProblem>(testing::multi_rows(p, spec));
  }
  return *slot;
}

// Milliseconds of the single-token decode of each multi_problem cache, per
// (batch, seq_len, window, threads), as measured by its "/q1/single" row.
std::map<std::tuple<int, int, int, int>, double>& single_ms() {
  static std::map<std::tuple<int, int, int, int>, double> ms;
  return ms;
}

// mode: "single" (the cache's B single-token rows), "rows" (query_start_loc),
// "expanded" (the same rows as single-token rows with synthetic lengths).
void decode_multi(benchmark::State& st, int batch, int seq_len, int q_len, int window, int threads,
                  const std::string& isa, const std::string& mode) {
  const testing::MultiProblem& m = multi_problem(batch, seq_len, q_len, window);
  std::vector<float> out, lse;
  DecodeArgs a = mode == "single" ? m.p.args(out, lse) : mode == "rows" ? m.args(out, lse) : m.expanded_args(out, lse);
  if (mode == "single") a.sliding_window = window;
  const CpuOptions opt{threads, isa};
  double seconds = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = decode_cpu(m.p.view(), a, opt);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) st.SkipWithError(s.to_string().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  const double token_heads = double(batch) * seq_len * kKvHeads;
  report(st, seconds, token_heads * m.p.layout.format.slot_bytes(), token_heads, threads);
  const double ms = seconds / static_cast<double>(st.iterations()) * 1e3;
  const std::tuple<int, int, int, int> key{batch, seq_len, window, threads};
  if (mode == "single") single_ms()[key] = ms;
  const auto single = single_ms().find(key);
  st.counters["x_single"] = single != single_ms().end() ? ms / single->second : 0.0;
  st.counters["rows"] = mode == "single" ? batch : double(batch) * q_len;
}

void register_multi(const std::string& isa) {
  struct Case {
    int q_len, window;
  };
  struct Shape {
    int batch, seq;
    std::vector<Case> cases;  // a window's q_len 1 case before its others (x_single)
  };
  const std::vector<Shape> shapes = {
      {4, 8192, {{1, 0}, {4, 0}, {16, 0}, {128, 0}, {1, 1024}, {16, 1024}}},
      {1, 32768, {{1, 0}, {4, 0}, {16, 0}}},
  };
  for (const Shape& sh : shapes) {
    for (int threads : {2, 1}) {
      for (const Case c : sh.cases) {
        for (const std::string mode : {"single", "rows", "expanded"}) {
          if ((c.q_len == 1) != (mode == "single")) continue;
          const std::string name = "decode-multi/4bit_nc/B" + std::to_string(sh.batch) + "x" + std::to_string(sh.seq) +
                                   (c.window ? "/w" + std::to_string(c.window) : "") + "/q" + std::to_string(c.q_len) +
                                   "/t" + std::to_string(threads) + "/" + isa + "/" + mode;
          const int batch = sh.batch, seq = sh.seq;
          reg(name, [=](benchmark::State& st) { decode_multi(st, batch, seq, c.q_len, c.window, threads, isa, mode); });
        }
      }
    }
  }
}

void register_all() {
  const std::string best = available_isas().back();
  const std::vector<std::pair<int, int>> shapes = {{1, 32768}, {4, 8192}, {16, 2048}, {16, 32768}};
  constexpr LayoutKind kSoA = LayoutKind::kSoA;
  constexpr LayoutKind kAoS = LayoutKind::kAoS;
  for (LayoutKind layout : {kSoA, kAoS}) {
    const std::string decode_prefix = layout == kSoA ? "decode/" : "decode-aos/";
    for (Preset preset : kAllPresets) {
      for (auto [batch, seq] : shapes) {
        for (int threads : {2, 1}) {
          const std::string name = decode_prefix + short_name(preset) + "/B" + std::to_string(batch) + "x" +
                                   std::to_string(seq) + "/t" + std::to_string(threads) + "/" + best;
          reg(name, [=](benchmark::State& st) { decode(st, preset, layout, batch, seq, threads, best); });
        }
      }
    }
  }
  for (const std::string& isa : available_isas()) {
    if (isa == best) continue;
    for (auto [batch, seq] : shapes) {
      const std::string name =
          "decode/4bit_nc/B" + std::to_string(batch) + "x" + std::to_string(seq) + "/t2/" + isa;
      reg(name, [=](benchmark::State& st) { decode(st, Preset::k4BitNc, kSoA, batch, seq, 2, isa); });
    }
  }
  for (Preset preset : kAllPresets) {
    for (auto [batch, seq] : shapes) {
      const std::string name = std::string("decode/") + short_name(preset) + "/B" + std::to_string(batch) + "x" +
                               std::to_string(seq) + "/t1/reference";
      reg(name, [=](benchmark::State& st) { decode(st, preset, kSoA, batch, seq, 1, "reference"); })->Iterations(2);
    }
  }
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const std::string dt = dtype == DType::kFloat32 ? "f32" : "bf16";
    for (int threads : {2, 1}) {
      for (const std::string& isa : available_isas()) {
        if (isa == "scalar" && dtype != DType::kFloat32) continue;
        for (LayoutKind layout : {kSoA, kAoS}) {
          const std::string name = (layout == kSoA ? "encode/" : "encode-aos/") + std::string("4bit_nc/") + dt +
                                   "/N8192/t" + std::to_string(threads) + "/" + isa;
          reg(name, [=](benchmark::State& st) { encode(st, Preset::k4BitNc, layout, 8192, dtype, threads, isa); });
        }
      }
    }
  }
  register_multi(best);
  reg("encode/4bit_nc/f32/N8192/t1/reference",
      [](benchmark::State& st) { encode(st, Preset::k4BitNc, kSoA, 8192, DType::kFloat32, 1, "reference"); })
      ->Iterations(3);
}

}  // namespace
}  // namespace turboquant::bench

int main(int argc, char** argv) {
  using namespace turboquant;
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_backend", cpu_backend_name());
  std::string isas;
  for (const std::string& s : available_isas()) isas += s + " ";
  benchmark::AddCustomContext("available_isas", isas);
  benchmark::AddCustomContext("hardware_threads", std::to_string(std::thread::hardware_concurrency()));
  bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
