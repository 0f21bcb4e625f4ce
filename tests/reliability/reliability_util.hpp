// Helpers for the reliability tests (docs/RELIABILITY.md): the backends a
// test runs (from the library's registry: the golden model, the fast CPU
// backend on every ISA this CPU runs, the CUDA backends where a GPU is
// present), guarded buffers, seeds, and a streaming float64 attention over
// the dequantized cache for long sequences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/f64_oracle.hpp"
#include "common/random_problem.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/turboquant.hpp"
#define TQ_REL_HAVE_CPU 1  // the fast CPU backend is always built

namespace tq_rel {

using namespace turboquant;  // NOLINT: test code
namespace tqt = turboquant::testing;

// The seed of a random test: TQ_SEED from the environment, else `fallback`.
// Printed so that a failure can be replayed (TQ_SEED=<n> ./test_reliability).
inline std::uint32_t seed(std::uint32_t fallback) {
  const char* env = std::getenv("TQ_SEED");
  const std::uint32_t s = env ? static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10)) : fallback;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[   SEED   ] %s.%s: %u (rerun with TQ_SEED=%u)\n", info ? info->test_suite_name() : "?",
              info ? info->name() : "?", s, s);
  return s;
}

struct DecodeBackend {
  std::string name;
  std::function<Status(const ConstCacheView&, const DecodeArgs&)> decode;
  const Backend* backend = nullptr;  // the registry's entry (for supports())
  BackendOptions options;
};
struct EncodeBackend {
  std::string name;
  std::function<Status(const CacheView&, const EncodeArgs&)> encode;
  const Backend* backend = nullptr;
  BackendOptions options;
};

// Whether `be` implements calls shaped like `args` (e.g. the CUDA backends'
// head_dims): a test of a shape some backend does not implement skips that
// backend, which must say so as kUnsupported rather than fail some other way.
template <class Entry, class View, class Args>
bool implements(const Entry& be, const View& view, const Args& args) {
  return be.backend == nullptr || be.backend->supports(view, args, be.options).code() != StatusCode::kUnsupported;
}

// The registry's backends (turboquant/backend.hpp) that run here and whose
// results the tests compare with the golden model's bits: every available
// backend for encode, those with exact_decode() for decode (cuda:strict where
// a GPU is present, not cuda:fast). The golden model is named "reference";
// threaded backends run at 2 threads, the default CPU path at 1 thread too
// (test_determinism covers more thread counts). `call(backend, options)`
// makes the test's entry.
template <class Entry, class Call>
std::vector<Entry> exact_backends(bool decode, Call call) {
  std::vector<Entry> v;
  for (const Backend* b : backends()) {
    if (!b->available() || (decode && !b->exact_decode())) continue;
    const std::string name(b->name());
    if (!b->threaded()) {
      v.push_back({name == "cpu-ref" ? "reference" : name, call(b, BackendOptions{}), b, BackendOptions{}});
      continue;
    }
    const std::vector<int> thread_counts = name == cpu_backend_name() ? std::vector<int>{1, 2} : std::vector<int>{2};
    for (int threads : thread_counts) {
      v.push_back({name + "(threads=" + std::to_string(threads) + ")", call(b, BackendOptions{threads}), b,
                   BackendOptions{threads}});
    }
  }
  return v;
}

inline std::vector<DecodeBackend> decode_backends() {
  return exact_backends<DecodeBackend>(true, [](const Backend* b, BackendOptions o) {
    return [b, o](const ConstCacheView& c, const DecodeArgs& a) { return b->decode(c, a, o); };
  });
}

inline std::vector<EncodeBackend> encode_backends() {
  return exact_backends<EncodeBackend>(false, [](const Backend* b, BackendOptions o) {
    return [b, o](const CacheView& c, const EncodeArgs& a) { return b->encode(c, a, o); };
  });
}

// A buffer with kGuard canary bytes before and after it, in one allocation.
class Guarded {
 public:
  static constexpr std::size_t kGuard = 64;
  explicit Guarded(std::size_t bytes, std::uint8_t fill = 0xA5) : raw_(bytes + 2 * kGuard, fill), bytes_(bytes) {
    for (std::size_t i = 0; i < kGuard; ++i) {
      raw_[i] = canary(i);
      raw_[kGuard + bytes + i] = canary(i + 1000);
    }
  }
  std::uint8_t* data() { return raw_.data() + kGuard; }
  const std::uint8_t* data() const { return raw_.data() + kGuard; }
  std::size_t size() const { return bytes_; }
  MutableBuffer buffer() { return {data(), bytes_}; }
  ConstBuffer const_buffer() const { return {data(), bytes_}; }
  // The first guard byte that changed, or "" when all are intact.
  std::string damage() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (raw_[i] != canary(i)) return "guard byte " + std::to_string(kGuard - i) + " before the buffer changed";
      if (raw_[kGuard + bytes_ + i] != canary(i + 1000)) return "guard byte " + std::to_string(i) + " after the buffer changed";
    }
    return "";
  }

 private:
  static std::uint8_t canary(std::size_t i) { return static_cast<std::uint8_t>(0x5A ^ (i * 131)); }
  std::vector<std::uint8_t> raw_;
  std::size_t bytes_;
};

inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// Every fp16 metadata field of every (slot, head) in `slots` is finite.
inline bool metadata_finite(const BlockLayout& l, const std::uint8_t* cache, const std::vector<std::int64_t>& slots,
                            std::string* where = nullptr) {
  for (std::int64_t slot : slots) {
    if (slot < 0) continue;
    const std::uint8_t* block = cache + l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      for (MetaField f : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
        if (f == MetaField::kKeyNorm && l.format.fp8_keys()) continue;
        if (!std::isfinite(core::read_meta(l, block, t, h, f))) {
          if (where) *where = "slot " + std::to_string(slot) + " head " + std::to_string(h) + " field " + std::to_string(int(f));
          return false;
        }
      }
    }
  }
  return true;
}

// x <- H x / sqrt(n), H the Sylvester Hadamard matrix (H[i][j] =
// (-1)^popcount(i & j)), as a fast Walsh-Hadamard transform: the query in the
// basis of Lloyd-Max keys. f64_oracle.hpp multiplies by the matrix instead, so
// the two oracles also check each other's rotation.
inline void hadamard_f64(std::vector<double>& x) {
  const std::size_t n = x.size();
  for (std::size_t half = 1; half < n; half *= 2) {
    for (std::size_t i = 0; i < n; i += 2 * half) {
      for (std::size_t j = i; j < i + half; ++j) {
        const double a = x[j], b = x[j + half];
        x[j] = a + b;
        x[j + half] = a - b;
      }
    }
  }
  const double r = 1.0 / std::sqrt(double(n));
  for (double& v : x) v *= r;
}

// Streaming float64 attention over the dequantized cache, written like
// tests/common/f64_oracle.hpp (independent of the library's decode and of
// core::BlockLayout: it shares that oracle's spec-written slot decoder,
// tqt::oracle_token, for both layouts) but in one pass with a running max, so
// that 1,000,000-token sequences need no per-token storage. out [B, Hq, D],
// lse [B, Hq] (natural log).
inline void f64_attention_streaming(const tqt::OracleInput& in, std::vector<double>& out, std::vector<double>& lse) {
  const Format& f = in.layout.format;
  const tqt::OracleSlotMap m(in.layout);
  const int D = f.head_dim, bs = in.layout.block_size, hk = in.layout.num_kv_heads;
  const int group = in.num_q_heads / hk;
  const float* cents = tqt::oracle_centroids(in);
  out.assign(static_cast<std::size_t>(in.batch) * in.num_q_heads * D, 0.0);
  lse.assign(static_cast<std::size_t>(in.batch) * in.num_q_heads, -INFINITY);
  std::vector<double> q(D), acc(D), k(D), v(D);
  for (int b = 0; b < in.batch; ++b) {
    const int len = in.seq_lens[b];
    for (int hq = 0; hq < in.num_q_heads; ++hq) {
      const int h = hq / group;
      const float* qrow = in.query + (std::int64_t{b} * in.num_q_heads + hq) * D;
      q.assign(qrow, qrow + D);
      if (!m.fp8) hadamard_f64(q);
      double mx = -INFINITY, den = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t = 0; t < len; ++t) {
        const std::uint8_t* blk = in.cache + in.block_table[std::int64_t{b} * in.max_blocks + t / bs] * m.block_bytes();
        tqt::oracle_token(f, m, blk, t % bs, h, cents, k.data(), v.data());
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[d] * k[d];
        const double score = dot * in.scale;
        if (score > mx) {
          const double r = std::exp(mx - score);
          den *= r;
          for (double& a : acc) a *= r;
          mx = score;
        }
        const double w = std::exp(score - mx);
        den += w;
        for (int d = 0; d < D; ++d) acc[d] += w * v[d];
      }
      if (len == 0) continue;
      for (int d = 0; d < D; ++d) out[(std::int64_t{b} * in.num_q_heads + hq) * D + d] = acc[d] / den;
      lse[std::int64_t{b} * in.num_q_heads + hq] = mx + std::log(den);
    }
  }
}

// Re-encodes p.keys / p.values (after a test changed them) into a zeroed cache.
inline Status reencode(tqt::Problem& p, DType dtype = DType::kFloat32) {
  std::fill(p.cache.begin(), p.cache.end(), 0);
  const std::vector<std::uint8_t> k = tqt::as_dtype_bytes(p.keys, dtype), v = tqt::as_dtype_bytes(p.values, dtype);
  return encode_reference(CacheView{p.layout, p.cache.data(), p.num_blocks},
                          tqt::host_encode_args(tqt::bytes_of(k), tqt::bytes_of(v), dtype, p.slots));
}

// The float64 oracle's input for a decode call over host buffers.
inline tqt::OracleInput oracle_input(const ConstCacheView& cache, const DecodeArgs& a) {
  tqt::OracleInput in{cache.layout,
                          cache.data,
                          a.batch,
                          a.num_q_heads,
                          a.max_blocks_per_seq,
                          static_cast<const std::int32_t*>(a.block_table.data),
                          static_cast<const std::int32_t*>(a.seq_lens.data),
                          static_cast<const float*>(a.query.data),
                          static_cast<double>(a.softmax_scale)};
  return in;
}

// max |got - want| / max(|want|) over a row set, and the same for the LSE.
struct Error64 {
  double out_rel = 0;  // max abs error / max abs reference value
  double lse_abs = 0;
};
inline Error64 compare64(const std::vector<float>& out, const std::vector<float>& lse, const std::vector<double>& out64,
                         const std::vector<double>& lse64) {
  Error64 e;
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < out64.size(); ++i) {
    scale = std::max(scale, std::abs(out64[i]));
    err = std::max(err, std::abs(double(out[i]) - out64[i]));
  }
  e.out_rel = scale > 0 ? err / scale : err;
  for (std::size_t i = 0; i < lse64.size(); ++i) {
    if (std::isinf(lse64[i]) && lse64[i] == double(lse[i])) continue;
    e.lse_abs = std::max(e.lse_abs, std::abs(double(lse[i]) - lse64[i]));
  }
  return e;
}

}  // namespace tq_rel
