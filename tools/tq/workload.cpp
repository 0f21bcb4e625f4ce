#include "workload.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "turboquant/check/oracle.hpp"
#include "turboquant/core/half.hpp"

namespace tq {
namespace {

using turboquant::checks::parallel_for;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A standard normal that depends only on (stream, index): the same data for
// any thread count (Box-Muller on two hashed uniforms).
float normal_at(std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t h = splitmix64(stream * 0x632be59bd9b4e019ull + index);
  const double u1 = (static_cast<double>(h >> 40) + 0.5) / static_cast<double>(1ull << 24);
  const double u2 = static_cast<double>((h >> 8) & 0xffffffull) / static_cast<double>(1ull << 24);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

void fill_normal(std::vector<float>& x, std::uint64_t stream, bool bf16, int threads) {
  parallel_for(static_cast<std::int64_t>(x.size()), threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const float v = normal_at(stream, static_cast<std::uint64_t>(i));
      x[i] = bf16 ? turboquant::core::bf16_to_float(turboquant::core::float_to_bf16(v)) : v;
    }
  });
}

}  // namespace

Workload make_workload(const WorkloadSpec& spec, int threads) {
  Workload w;
  w.spec = spec;
  const int bs = spec.block_size;
  const int blocks_per_seq = (spec.seq_len + bs - 1) / bs;
  w.max_blocks = std::max(blocks_per_seq, 1);
  w.num_blocks = std::int64_t{spec.batch} * blocks_per_seq + 1;  // + one spare block nothing references
  w.num_tokens = std::int64_t{spec.batch} * spec.seq_len;
  const std::size_t row = static_cast<std::size_t>(spec.kv_heads) * spec.head_dim;

  std::vector<std::int32_t> physical(static_cast<std::size_t>(w.num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::mt19937_64 rng(spec.seed);
  std::shuffle(physical.begin(), physical.end(), rng);
  w.block_table.assign(static_cast<std::size_t>(spec.batch) * w.max_blocks, physical.back());
  w.seq_lens.assign(static_cast<std::size_t>(spec.batch), spec.seq_len);
  for (int b = 0; b < spec.batch; ++b) {
    for (int j = 0; j < blocks_per_seq; ++j) {
      w.block_table[static_cast<std::size_t>(b) * w.max_blocks + j] =
          physical[static_cast<std::size_t>(b) * blocks_per_seq + j];
    }
  }
  w.slots.resize(static_cast<std::size_t>(w.num_tokens));
  for (int b = 0; b < spec.batch; ++b) {
    for (int t = 0; t < spec.seq_len; ++t) {
      const std::int64_t blk = w.block_table[static_cast<std::size_t>(b) * w.max_blocks + t / bs];
      w.slots[static_cast<std::size_t>(std::int64_t{b} * spec.seq_len + t)] = blk * bs + t % bs;
    }
  }
  w.keys.resize(static_cast<std::size_t>(w.num_tokens) * row);
  w.values.resize(w.keys.size());
  w.query.resize(static_cast<std::size_t>(spec.batch) * spec.q_len * spec.q_heads * spec.head_dim);
  fill_normal(w.keys, spec.seed * 3 + 0, false, threads);
  fill_normal(w.values, spec.seed * 3 + 1, true, threads);
  fill_normal(w.query, spec.seed * 3 + 2, false, threads);
  if (spec.q_len > 1) {
    w.query_start_loc.resize(static_cast<std::size_t>(spec.batch) + 1);
    for (int b = 0; b <= spec.batch; ++b) w.query_start_loc[static_cast<std::size_t>(b)] = b * spec.q_len;
  }
  if (spec.sinks) {
    // A stream of its own: the K/V and queries stay those of the same seed without sinks.
    w.sinks.resize(static_cast<std::size_t>(spec.q_heads));
    fill_normal(w.sinks, ~spec.seed, false, 1);
    for (float& x : w.sinks) x += 2.0f;
  }
  return w;
}

double probe_read_gbps(int threads) {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  const std::size_t words = kBytes / sizeof(std::uint64_t);
  std::vector<std::uint64_t> buf(words);
  parallel_for(static_cast<std::int64_t>(words), threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) buf[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(i);
  });
  double best = 0;
  std::atomic<std::uint64_t> total{0};
  for (int pass = 0; pass < 4; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    parallel_for(static_cast<std::int64_t>(words), threads, [&](std::int64_t begin, std::int64_t end) {
      // Four independent sums so that the loop is bound by loads, not by one add chain.
      std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      std::int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        s0 += buf[static_cast<std::size_t>(i)];
        s1 += buf[static_cast<std::size_t>(i + 1)];
        s2 += buf[static_cast<std::size_t>(i + 2)];
        s3 += buf[static_cast<std::size_t>(i + 3)];
      }
      for (; i < end; ++i) s0 += buf[static_cast<std::size_t>(i)];
      total.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kBytes) / s / 1e9);
  }
  volatile std::uint64_t sink = total.load();  // keeps the reads
  (void)sink;
  return best;
}

}  // namespace tq
