// bench_gpu: decode (strict and fast, all four presets) and encode on the GPU,
// timed with CUDA events over CUDA-graph replays, each result also given as a
// fraction of a device-to-device copy ceiling measured in the same run.
//
//   bench_gpu [--csv FILE] [--reps N] [--quick] [--layout soa|aos|both]
//             [--preset P] [--shape BxS[,BxS...]] [--mode fast|strict|encode|dequantize]
//             [--q-len Q[,Q...]] [--no-expanded] [--sustained] [--head-dim D]
//
// Decode shapes (B x seq): 1x4096, 1x32768, 8x8192, 32x8192, 64x4096,
// 16x32768; D 128 (--head-dim: 64 or 256, named in the rows as "dD"), Hq 32,
// Hk 8, block 16, 32 splits, bf16 query and output.
// Every row is measured in both cache layouts by default (SoA, then AoS right
// after it), and the summary gives the AoS / SoA time of each. CSV columns:
// what,us,GBps,fraction_of_copy,layout (`what` does not name the layout, so
// SoA rows keep the names of older binaries; compare_bench.py pairs rows by
// (what, layout), a CSV without the column being SoA).
// --q-len: Q query tokens per sequence (speculative decoding's verification,
// chunked prefill), each shape twice: as query_start_loc rows ("qQ") and as
// the B x Q single-token rows vLLM expands them into ("qQ expanded": each row
// its own sequence of length seq - Q + i + 1 over the same blocks). Q = 1 is
// the plain decode. --no-expanded: only the query_start_loc rows.
// --mode dequantize (only when named): cuda::dequantize_sequences of 8 x 8192
// and 16 x 32768 tokens into [B, Hk, seq, D], fp16 keys in the rotated basis
// (what vLLM's continuation prefill uses), fp16 / bf16 / fp32 in the original.
// --sustained: each decode row also as "<row> sustained", the graph replayed
// 20 times back to back per timing (the GPU busy throughout, as under a loop of
// eager calls) instead of once from an idle device.
// Bytes counted = cache bytes of the tokens read (once) + query + output. Small
// caches are replicated and the graph cycles through the copies, so that the
// timed reads come from HBM, not L2. The decode and dequantize rows keep their
// large device buffers from row to row (row_buffer); TQ_BENCH_FRESH_BUFFERS=1
// allocates them per row instead, as binaries before 2026-12-06 did.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "turboquant/core/token_codec.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/dequantize.hpp"

namespace {

using namespace turboquant;

#define CHECK_CUDA(call)                                                                    \
  do {                                                                                      \
    const cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)
#define CHECK_TQ(expr)                                                                      \
  do {                                                                                      \
    const Status s_ = (expr);                                                               \
    if (!s_.ok()) {                                                                         \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, s_.to_string().c_str());      \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

__device__ __forceinline__ std::uint32_t hash32(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

// Random cache content: uniform code bytes (FP8 keys of moderate size), fp16
// metadata in realistic ranges. One thread per 4 bytes of a block.
__global__ void fill_cache(BlockLayout l, std::uint8_t* cache, std::int64_t num_blocks, std::uint64_t seed) {
  const std::int64_t words = l.block_bytes() / 4;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < num_blocks * words;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint32_t w = hash32(seed * 0x9e3779b97f4a7c15ull + i);
    // FP8 keys: exponent field 6..9, i.e. |k| in [0.5, 4) (raw random bytes reach 448).
    if (l.format.fp8_keys() && (i * 4) % l.block_bytes() < l.meta_offset()) {
      w = (w & 0x87878787u) | (((w >> 3) & 0x03030303u) + 0x06060606u) << 3;
    }
    reinterpret_cast<std::uint32_t*>(cache)[i] = w;
  }
}

__global__ void fill_meta(BlockLayout l, std::uint8_t* cache, std::int64_t num_blocks, std::uint64_t seed) {
  const std::int64_t per_block = std::int64_t{l.block_size} * l.num_kv_heads;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < num_blocks * per_block;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t blk = i / per_block;
    const int t = static_cast<int>(i % l.block_size);
    const int h = static_cast<int>(i / l.block_size % l.num_kv_heads);
    std::uint8_t* block = cache + l.block_base(blk);
    const float u0 = (hash32(seed + 3 * i) >> 8) * 0x1p-24f;
    const float u1 = (hash32(seed + 3 * i + 1) >> 8) * 0x1p-24f;
    const float u2 = (hash32(seed + 3 * i + 2) >> 8) * 0x1p-24f;
    if (!l.format.fp8_keys()) core::write_meta(l, block, t, h, MetaField::kKeyNorm, 0.5f + 1.5f * u0);
    core::write_meta(l, block, t, h, MetaField::kValueScale, 0.01f + 0.3f * u1);
    core::write_meta(l, block, t, h, MetaField::kValueZero, -1.2f * u2);
  }
}

__global__ void fill_bf16(std::uint16_t* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float u = ((hash32(seed + i) >> 8) * 0x1p-24f - 0.5f) * 3.4f;
    x[i] = core::float_to_bf16(u);
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

// Median milliseconds per replay of `reps` timings of `launches` replays of
// `exec` launched back to back (after warm-up). launches = 1: a replay from an
// idle device. kSustained (--sustained): the GPU busy for the whole stretch, as
// under eager calls issued in a loop (PERFORMANCE.md, Python run 5).
constexpr int kSustained = 20;
double time_graph(cudaGraphExec_t exec, cudaStream_t s, int reps, int launches = 1) {
  Timer t;
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(exec, s));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(t.a, s));
    for (int j = 0; j < launches; ++j) CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaEventRecord(t.b, s));
    CHECK_CUDA(cudaEventSynchronize(t.b));
    CHECK_CUDA(cudaEventElapsedTime(&ms[i], t.a, t.b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2] / launches;
}

// The graph of what `enqueue` puts on `s` (captured), instantiated.
template <class F>
cudaGraphExec_t capture(cudaStream_t s, F&& enqueue) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  enqueue();
  CHECK_CUDA(cudaStreamEndCapture(s, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return exec;
}

// Host microseconds per call of `enqueue` (calls not synchronized; the
// stream is drained after), for the eager decode() vs run(plan) overhead.
template <class F>
double host_us_per_call(cudaStream_t s, F&& enqueue) {
  constexpr int kCalls = 20;  // few enough that the launch queue never fills (that would time the GPU)
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) enqueue();
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_CUDA(cudaStreamSynchronize(s));
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls;
}

double copy_ceiling_gbs(cudaStream_t s) {
  const std::size_t bytes = std::size_t(1) << 31;  // 2 GiB each way
  void *src, *dst;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemsetAsync(src, 1, bytes, s));
  Timer t;
  std::vector<float> ms(15);
  for (int i = -2; i < 15; ++i) {
    CHECK_CUDA(cudaEventRecord(t.a, s));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    CHECK_CUDA(cudaEventRecord(t.b, s));
    CHECK_CUDA(cudaEventSynchronize(t.b));
    if (i >= 0) CHECK_CUDA(cudaEventElapsedTime(&ms[i], t.a, t.b));
  }
  std::sort(ms.begin(), ms.end());
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

struct Shape {
  int batch;
  int seq;
  int q_len = 1;          // query tokens per sequence
  bool expanded = false;  // as B x q_len single-token rows
};

struct Row {
  std::string what;
  LayoutKind layout;
  double us;
  double gbs;
  double frac;
};

std::vector<Row> g_rows;
std::string g_only_mode;
bool g_sustained = false;  // --sustained: decode rows also timed back to back
int g_decode_dims = 128;   // --head-dim: the decode rows' head_dim
std::FILE* g_csv = nullptr;

void report(const std::string& what, LayoutKind layout, double us, double bytes, double ceiling) {
  const double gbs = bytes / (us * 1e-6) / 1e9;
  g_rows.push_back({what, layout, us, gbs, gbs / ceiling});
  std::printf("%-40s %s %10.1f us %8.0f GB/s %6.1f%% of copy\n", what.c_str(), core::layout_name(layout), us, gbs,
              100.0 * gbs / ceiling);
  std::fflush(stdout);
  if (g_csv) {
    std::fprintf(g_csv, "%s,%.2f,%.1f,%.4f,%s\n", what.c_str(), us, gbs, gbs / ceiling, core::layout_name(layout));
  }
}

// A failed call is reported in place of its row (e.g. a backend without an
// instance for the layout), and the benchmark goes on.
bool report_status(const std::string& what, LayoutKind layout, const Status& st) {
  if (st.ok()) return true;
  std::printf("%-40s %s not run: %s\n", what.c_str(), core::layout_name(layout), st.to_string().c_str());
  std::fflush(stdout);
  return false;
}

// One row of a single-call benchmark: `call` (returning its Status) once,
// reported in place of the row if it fails, then its graph timed.
template <class F>
void bench_call(const char* name, LayoutKind layout, double bytes, double ceiling, int reps, cudaStream_t s, F&& call) {
  if (!report_status(name, layout, call())) return;
  CHECK_CUDA(cudaStreamSynchronize(s));
  cudaGraphExec_t exec = capture(s, [&] { CHECK_TQ(call()); });
  report(name, layout, time_graph(exec, s, reps) * 1e3, bytes, ceiling);
  CHECK_CUDA(cudaGraphExecDestroy(exec));
}

// The large device buffers of the decode and dequantize rows, kept from row to
// row as an application keeps its cache and outputs: slot i grows (freed,
// allocated again) only when a row needs more. With each row allocating its
// own (TQ_BENCH_FRESH_BUFFERS=1, the way before), the first one or two rows
// after a larger shape's (a preset's 8 x 8192 fp16 rotated rows) took
// 1.13-1.20x the time with kept buffers, every other row the same (H100,
// PERFORMANCE.md round 22). Slots: 0-2 the dequantize's cache, keys and
// values, 3 the decode's cache copies. release_row_buffer after the row.
bool fresh_buffers() {
  static const bool fresh = [] {
    const char* v = std::getenv("TQ_BENCH_FRESH_BUFFERS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return fresh;
}

void* row_buffer(int slot, std::size_t bytes) {
  void* p = nullptr;
  if (fresh_buffers()) {
    CHECK_CUDA(cudaMalloc(&p, bytes));
    return p;
  }
  static void* kept[4] = {};
  static std::size_t size[4] = {};
  if (bytes > size[slot]) {
    if (kept[slot] != nullptr) CHECK_CUDA(cudaFree(kept[slot]));
    CHECK_CUDA(cudaMalloc(&kept[slot], bytes));
    size[slot] = bytes;
  }
  return kept[slot];
}

void release_row_buffer(void* p) {
  if (fresh_buffers()) CHECK_CUDA(cudaFree(p));
}

void bench_decode(Preset preset, LayoutKind layout, Shape shape, double ceiling, int reps, cudaStream_t s) {
  const int dims = g_decode_dims, hk = 8, hq = 32, bs = 16, splits = 32;
  const BlockLayout l{preset_format(preset, dims, layout), bs, hk};
  const int blocks_per_seq = (shape.seq + bs - 1) / bs;
  const std::int64_t num_blocks = std::int64_t{shape.batch} * blocks_per_seq + 1;
  const std::size_t cache_bytes = static_cast<std::size_t>(num_blocks * l.block_bytes());
  const int copies = static_cast<int>(std::max<std::size_t>(1, (std::size_t(384) << 20) / cache_bytes));
  auto* cache = static_cast<std::uint8_t*>(row_buffer(3, cache_bytes * copies));
  fill_cache<<<4096, 256, 0, s>>>(l, cache, num_blocks * copies, 1234 + static_cast<int>(preset));
  fill_meta<<<4096, 256, 0, s>>>(l, cache, num_blocks * copies, 77);
  CHECK_CUDA(cudaGetLastError());
  std::vector<std::int32_t> table(std::size_t(shape.batch) * blocks_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  std::vector<std::int32_t> lens(shape.batch, shape.seq);
  const int q_len = shape.q_len;
  const int query_rows = shape.batch * q_len;
  std::vector<std::int32_t> qsl;  // query_start_loc of the multi-token form
  if (shape.expanded) {  // row b * q_len + i: sequence b's blocks, its position seq - q_len + i
    std::vector<std::int32_t> rows_table, rows_lens;
    for (int b = 0; b < shape.batch; ++b) {
      for (int i = 0; i < q_len; ++i) {
        rows_table.insert(rows_table.end(), table.begin() + std::int64_t{b} * blocks_per_seq,
                          table.begin() + std::int64_t{b + 1} * blocks_per_seq);
        rows_lens.push_back(shape.seq - q_len + i + 1);
      }
    }
    table.swap(rows_table);
    lens.swap(rows_lens);
  } else if (q_len > 1) {
    for (int b = 0; b <= shape.batch; ++b) qsl.push_back(b * q_len);
  }
  std::int32_t *d_table, *d_lens, *d_qsl = nullptr;
  std::uint16_t *d_q, *d_out;
  float* d_lse;
  const std::size_t rows = std::size_t(query_rows) * hq;
  CHECK_CUDA(cudaMalloc(&d_table, table.size() * 4));
  CHECK_CUDA(cudaMalloc(&d_lens, lens.size() * 4));
  CHECK_CUDA(cudaMalloc(&d_q, rows * dims * 2));
  CHECK_CUDA(cudaMalloc(&d_out, rows * dims * 2));
  CHECK_CUDA(cudaMalloc(&d_lse, rows * 4));
  CHECK_CUDA(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  if (!qsl.empty()) {
    CHECK_CUDA(cudaMalloc(&d_qsl, qsl.size() * 4));
    CHECK_CUDA(cudaMemcpy(d_qsl, qsl.data(), qsl.size() * 4, cudaMemcpyHostToDevice));
  }
  fill_bf16<<<256, 256, 0, s>>>(d_q, std::int64_t(rows) * dims, 9);
  const std::size_t ws_bytes = cuda::decode_workspace_bytes(query_rows, hq, splits, dims);
  void* ws;
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  CHECK_CUDA(cudaStreamSynchronize(s));

  DecodeArgs a;
  a.query = {d_q, rows * dims * 2};
  a.query_dtype = DType::kBFloat16;
  a.batch = shape.expanded ? query_rows : shape.batch;
  if (d_qsl != nullptr) {
    a.query_start_loc = {d_qsl, qsl.size() * 4};
    a.num_query_rows = query_rows;
  }
  a.num_q_heads = hq;
  a.block_table = {d_table, table.size() * 4};
  a.max_blocks_per_seq = blocks_per_seq;
  a.seq_lens = {d_lens, lens.size() * 4};
  a.softmax_scale = 1.0f / std::sqrt(float(dims));
  a.num_splits = splits;
  a.out = {d_out, rows * dims * 2};
  a.out_dtype = DType::kBFloat16;
  a.lse = {d_lse, rows * 4};
  const double bytes = double(shape.batch) * shape.seq * hk * l.format.slot_bytes() + 2.0 * rows * dims * 2;
  std::vector<float> results[2];
  for (cuda::CudaMode mode : {cuda::CudaMode::kFast, cuda::CudaMode::kStrict}) {
    if (!g_only_mode.empty() && g_only_mode != cuda::mode_name(mode)) continue;
    char name[128];
    std::snprintf(name, sizeof name, "decode %-5s %-8s %2dx%-6d", cuda::mode_name(mode), preset_name(preset) + 11,
                  shape.batch, shape.seq);
    if (dims != 128) {  // D 128 keeps the names of older binaries
      std::snprintf(name + std::strlen(name), sizeof name - std::strlen(name), " d%d", dims);
    }
    if (q_len > 1 || shape.expanded) {  // the plain decode keeps the names of older binaries
      std::snprintf(name + std::strlen(name), sizeof name - std::strlen(name), " q%d%s", q_len,
                    shape.expanded ? " expanded" : "");
    }
    const char* kernel = cuda::decode_kernel_name(ConstCacheView(l, cache, num_blocks), a, mode);
    if (mode == cuda::CudaMode::kFast && std::strcmp(kernel, "cuda:fast") != 0) {
      report_status(name, layout, Status(StatusCode::kUnsupported, std::string("fast mode runs ") + kernel));
      continue;
    }
    // One plan per cache copy (a plan holds its cache), made outside the
    // capture (module load, smem attributes, pointer checks happen here).
    std::vector<cuda::DecodePlan> plans(copies);
    const Status plan_status = [&] {
      for (int c = 0; c < copies; ++c) {
        const Status st = cuda::make_decode_plan(ConstCacheView(l, cache + cache_bytes * c, num_blocks), a, mode,
                                                 {ws, ws_bytes}, &plans[c]);
        if (!st.ok()) return st;
      }
      return Status();
    }();
    if (!report_status(name, layout, plan_status)) continue;
    CHECK_TQ(cuda::run(plans[0], a, {ws, ws_bytes}, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    const double eager_us = host_us_per_call(s, [&] {
      CHECK_TQ(cuda::decode(ConstCacheView(l, cache, num_blocks), a, mode, {ws, ws_bytes}, s));
    });
    const double plan_us = host_us_per_call(s, [&] { CHECK_TQ(cuda::run(plans[0], a, {ws, ws_bytes}, s)); });
    cudaGraphExec_t exec = capture(s, [&] {
      for (int c = 0; c < copies; ++c) CHECK_TQ(cuda::run(plans[c], a, {ws, ws_bytes}, s));
    });
    const double us = time_graph(exec, s, reps) * 1e3 / copies;
    report(name, layout, us, bytes, ceiling);
    std::printf("    host per call: decode() %.1f us, run(plan) %.1f us\n", eager_us, plan_us);
    if (g_sustained) {
      report(std::string(name) + " sustained", layout, time_graph(exec, s, reps, kSustained) * 1e3 / copies, bytes,
             ceiling);
    }
    // Output of the last replay (copy 'copies-1'), to compare the modes.
    std::vector<std::uint16_t> out(rows * dims);
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, out.size() * 2, cudaMemcpyDeviceToHost));
    auto& r = results[mode == cuda::CudaMode::kFast ? 0 : 1];
    for (std::uint16_t v : out) r.push_back(core::bf16_to_float(v));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < std::min(results[0].size(), results[1].size()); ++i) {
    num += std::pow(double(results[0][i]) - results[1][i], 2);
    den += std::pow(double(results[1][i]), 2);
  }
  if (!results[0].empty() && !results[1].empty()) {
    std::printf("    fast vs strict rel_l2 %.2e (bf16 output)\n", std::sqrt(num / std::max(den, 1e-30)));
  }
  release_row_buffer(cache);
  CHECK_CUDA(cudaFree(d_table));
  CHECK_CUDA(cudaFree(d_lens));
  CHECK_CUDA(cudaFree(d_q));
  CHECK_CUDA(cudaFree(d_out));
  CHECK_CUDA(cudaFree(d_lse));
  CHECK_CUDA(cudaFree(d_qsl));
  CHECK_CUDA(cudaFree(ws));
}

void bench_encode(Preset preset, LayoutKind layout, std::int64_t tokens, double ceiling, int reps, cudaStream_t s) {
  const int dims = 128, hk = 8, bs = 16;
  const BlockLayout l{preset_format(preset, dims, layout), bs, hk};
  const std::int64_t num_blocks = (tokens + bs - 1) / bs;
  const std::size_t kv = std::size_t(tokens) * hk * dims;
  std::uint8_t* cache;
  std::uint16_t *k, *v;
  std::int64_t* slots;
  CHECK_CUDA(cudaMalloc(&cache, num_blocks * l.block_bytes()));
  CHECK_CUDA(cudaMalloc(&k, kv * 2));
  CHECK_CUDA(cudaMalloc(&v, kv * 2));
  CHECK_CUDA(cudaMalloc(&slots, tokens * 8));
  fill_bf16<<<4096, 256, 0, s>>>(k, kv, 1);
  fill_bf16<<<4096, 256, 0, s>>>(v, kv, 2);
  std::vector<std::int64_t> h_slots(tokens);
  std::iota(h_slots.begin(), h_slots.end(), 0);
  std::shuffle(h_slots.begin(), h_slots.end(), std::mt19937(3));
  CHECK_CUDA(cudaMemcpy(slots, h_slots.data(), tokens * 8, cudaMemcpyHostToDevice));
  EncodeArgs a;
  a.keys = {k, kv * 2};
  a.values = {v, kv * 2};
  a.dtype = DType::kBFloat16;
  a.num_tokens = tokens;
  a.slot_mapping = {slots, std::size_t(tokens) * 8};
  const CacheView view{l, cache, num_blocks};
  char name[128];
  std::snprintf(name, sizeof name, "encode %-8s %lldx%d bf16", preset_name(preset) + 11, (long long)tokens, hk);
  const double bytes = 2.0 * kv * 2 + double(tokens) * hk * l.format.slot_bytes();
  bench_call(name, layout, bytes, ceiling, reps, s, [&] { return cuda::encode(view, a, s); });
  CHECK_CUDA(cudaFree(cache));
  CHECK_CUDA(cudaFree(k));
  CHECK_CUDA(cudaFree(v));
  CHECK_CUDA(cudaFree(slots));
}

// The block-table dequantize of B whole sequences into [B, Hk, seq, D] (vLLM's
// continuation prefill feeds these to FlashAttention; its own dequantize
// returns keys in the rotated basis). Bytes = cache read + K and V written.
void bench_dequantize(Preset preset, LayoutKind layout, Shape shape, DType out, Basis basis, double ceiling, int reps,
                      cudaStream_t s) {
  const int dims = 128, hk = 8, bs = 16;
  const BlockLayout l{preset_format(preset, dims, layout), bs, hk};
  const int blocks_per_seq = (shape.seq + bs - 1) / bs;
  const std::int64_t num_blocks = std::int64_t{shape.batch} * blocks_per_seq;
  const std::size_t elements = std::size_t(shape.batch) * hk * shape.seq * dims;
  auto* cache = static_cast<std::uint8_t*>(row_buffer(0, num_blocks * l.block_bytes()));
  void* keys = row_buffer(1, elements * dtype_size(out));
  void* values = row_buffer(2, elements * dtype_size(out));
  std::int32_t *d_table, *d_lens;
  fill_cache<<<4096, 256, 0, s>>>(l, cache, num_blocks, 4321 + static_cast<int>(preset));
  fill_meta<<<4096, 256, 0, s>>>(l, cache, num_blocks, 78);
  CHECK_CUDA(cudaGetLastError());
  std::vector<std::int32_t> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(6));
  const std::vector<std::int32_t> lens(shape.batch, shape.seq);
  CHECK_CUDA(cudaMalloc(&d_table, table.size() * 4));
  CHECK_CUDA(cudaMalloc(&d_lens, lens.size() * 4));
  CHECK_CUDA(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  DequantizeSequencesArgs a;
  a.block_table = {d_table, table.size() * 4};
  a.batch = shape.batch;
  a.max_blocks_per_seq = blocks_per_seq;
  a.seq_lens = {d_lens, lens.size() * 4};
  a.max_seq = shape.seq;
  a.keys = {keys, elements * dtype_size(out)};
  a.values = {values, elements * dtype_size(out)};
  a.out_dtype = out;
  a.basis = basis;
  const ConstCacheView view(l, cache, num_blocks);
  char name[128];
  std::snprintf(name, sizeof name, "dequantize %-8s %2dx%-6d %s %s", preset_name(preset) + 11, shape.batch, shape.seq,
                dtype_name(out), basis == Basis::kOriginal ? "original" : "rotated");
  const double bytes = double(shape.batch) * shape.seq * hk * l.format.slot_bytes() + 2.0 * elements * dtype_size(out);
  bench_call(name, layout, bytes, ceiling, reps, s, [&] { return cuda::dequantize_sequences(view, a, s); });
  release_row_buffer(cache);
  release_row_buffer(keys);
  release_row_buffer(values);
  CHECK_CUDA(cudaFree(d_table));
  CHECK_CUDA(cudaFree(d_lens));
}

// The presets in the order of every table of docs/PERFORMANCE.md.
constexpr Preset kBenchPresets[] = {Preset::k4BitNc, Preset::kK8V4, Preset::kK3V4Nc, Preset::k3BitNc};

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  bool quick = false;
  bool with_expanded = true;
  std::string only_preset, only_shape, only_mode, layouts = "both";
  std::vector<int> q_lens = {1};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) g_csv = std::fopen(argv[++i], "w");
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--sustained")) g_sustained = true;
    else if (!std::strcmp(argv[i], "--no-expanded")) with_expanded = false;
    else if (!std::strcmp(argv[i], "--preset") && i + 1 < argc) only_preset = argv[++i];  // e.g. 4bit_nc
    else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = argv[++i];    // e.g. 16x32768,1x4096
    else if (!std::strcmp(argv[i], "--layout") && i + 1 < argc) layouts = argv[++i];     // soa | aos | both
    else if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) only_mode = argv[++i];      // fast | strict | encode
    else if (!std::strcmp(argv[i], "--head-dim") && i + 1 < argc) {                         // 64 | 128 | 256
      g_decode_dims = std::atoi(argv[++i]);
      const std::vector<int> dims = cuda::supported_head_dims();
      if (std::find(dims.begin(), dims.end(), g_decode_dims) == dims.end()) {
        std::fprintf(stderr, "bench_gpu: --head-dim %d: the CUDA kernels are built for", g_decode_dims);
        for (int d : dims) std::fprintf(stderr, " %d", d);
        std::fprintf(stderr, "\n");
        return 1;
      }
    }
    else if (!std::strcmp(argv[i], "--q-len") && i + 1 < argc) {                            // e.g. 1,4,16
      q_lens.clear();
      for (char* t = std::strtok(argv[++i], ","); t != nullptr; t = std::strtok(nullptr, ",")) {
        const int q = std::atoi(t);
        if (q < 1 || q > 128) {
          std::fprintf(stderr, "bench_gpu: --q-len %s: each must be 1 .. 128\n", t);
          return 1;
        }
        q_lens.push_back(q);
      }
    }
  }
  g_only_mode = only_mode;
  std::vector<LayoutKind> layout_list;
  if (layouts == "soa" || layouts == "both") layout_list.push_back(LayoutKind::kSoA);
  if (layouts == "aos" || layouts == "both") layout_list.push_back(LayoutKind::kAoS);
  if (layout_list.empty()) {
    std::fprintf(stderr, "bench_gpu: --layout %s: must be soa, aos or both\n", layouts.c_str());
    return 1;
  }
  if (const Status st = cuda::device_status(); !st.ok()) {
    std::fprintf(stderr, "bench_gpu: %s\n", st.to_string().c_str());
    return 3;
  }
  std::printf("device: %s\n", cuda::device_description().c_str());
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double ceiling = copy_ceiling_gbs(s);
  std::printf("copy ceiling (D2D 2 GiB, read + write): %.0f GB/s\n", ceiling);
  if (g_csv) std::fprintf(g_csv, "what,us,GBps,fraction_of_copy,layout\ncopy_ceiling,0,%.1f,1,\n", ceiling);
  std::vector<Shape> shapes = {{1, 4096}, {1, 32768}, {8, 8192}, {32, 8192}, {64, 4096}, {16, 32768}};
  if (quick) shapes = {{1, 4096}, {16, 32768}};
  auto preset_ok = [&](Preset p) { return only_preset.empty() || only_preset == preset_name(p) + 11; };
  auto shape_ok = [&](Shape sh) {  // --shape BxS[,BxS...]
    const std::string text = std::to_string(sh.batch) + "x" + std::to_string(sh.seq);
    return only_shape.empty() || ("," + only_shape + ",").find("," + text + ",") != std::string::npos;
  };
  for (Preset preset : kBenchPresets) {
    if (!preset_ok(preset) || only_mode == "encode" || only_mode == "dequantize") continue;
    for (Shape sh : shapes) {
      if (!shape_ok(sh)) continue;
      for (int q : q_lens) {
        for (bool expanded : {false, true}) {
          if ((q == 1 || !with_expanded) && expanded) continue;
          Shape rows = sh;
          rows.q_len = q;
          rows.expanded = expanded;
          for (LayoutKind layout : layout_list) bench_decode(preset, layout, rows, ceiling, reps, s);
        }
      }
    }
  }
  for (Preset preset : kBenchPresets) {
    if (!preset_ok(preset) || !(only_mode.empty() || only_mode == "encode")) continue;
    for (LayoutKind layout : layout_list) bench_encode(preset, layout, 65536, ceiling, reps, s);
  }
  for (Preset preset : kBenchPresets) {
    if (!preset_ok(preset) || only_mode != "dequantize") continue;  // only when asked for
    for (Shape sh : {Shape{8, 8192}, Shape{16, 32768}}) {
      if (!shape_ok(sh)) continue;
      for (const auto& [out, basis] : {std::pair{DType::kFloat16, Basis::kRotated}, std::pair{DType::kFloat16, Basis::kOriginal},
                                       std::pair{DType::kBFloat16, Basis::kOriginal}, std::pair{DType::kFloat32, Basis::kOriginal}}) {
        for (LayoutKind layout : layout_list) bench_dequantize(preset, layout, sh, out, basis, ceiling, reps, s);
      }
    }
  }
  std::printf("\nsummary (us, fraction of copy ceiling %.0f GB/s; aos/soa: the AoS time over the SoA time)\n", ceiling);
  for (const Row& r : g_rows) {
    std::printf("  %-40s %s %9.1f %6.3f", r.what.c_str(), core::layout_name(r.layout), r.us, r.frac);
    if (r.layout == LayoutKind::kAoS) {
      for (const Row& soa : g_rows) {
        if (soa.layout == LayoutKind::kSoA && soa.what == r.what) std::printf("   aos/soa %.3f", r.us / soa.us);
      }
    }
    std::printf("\n");
  }
  if (g_csv) std::fclose(g_csv);
  CHECK_CUDA(cudaStreamDestroy(s));
  return 0;
}
