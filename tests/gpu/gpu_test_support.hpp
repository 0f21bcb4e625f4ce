// Shared helpers of the CUDA tests: device skip, random paged caches, the
// golden model as oracle, bitwise and relative-L2 comparisons.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "turboquant/core/half.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/format.hpp"

#define TQ_REQUIRE_DEVICE()                                                            \
  do {                                                                                 \
    if (const ::turboquant::Status tq_s_ = ::turboquant::cuda::device_status(); !tq_s_.ok()) { \
      GTEST_SKIP() << tq_s_.to_string();                                               \
    }                                                                                  \
  } while (0)

namespace tq_gpu_test {

using namespace turboquant;

// A device allocation with 16 spare bytes, for copies placed past an aligned
// address (the kernels' narrow load and store paths).
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(std::size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes + 16), cudaSuccess); }
  ~DeviceMem() { cudaFree(p); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  std::uint8_t* at(std::size_t offset) const { return static_cast<std::uint8_t*>(p) + offset; }
};

// A decode problem with host buffers: a paged cache with random but finite
// content, a shuffled block table, random queries.
struct DecodeProblem {
  BlockLayout layout;
  std::vector<std::uint8_t> cache;
  std::int64_t num_blocks = 0;
  int batch = 0;
  int num_q_heads = 0;
  int max_blocks_per_seq = 0;
  std::vector<std::int32_t> block_table;
  std::vector<std::int32_t> seq_lens;
  DType query_dtype = DType::kFloat32;
  std::vector<std::uint8_t> query;  // [batch, Hq, D] of query_dtype
  float softmax_scale = 0.0f;
  int num_splits = 32;
  std::vector<float> rotation;  // optional dense PiT

  ConstCacheView view() const { return ConstCacheView(layout, cache.data(), num_blocks); }
  std::size_t rows() const { return std::size_t(batch) * num_q_heads; }
  // Args with host pointers; out/lse point into the given vectors (resized here).
  DecodeArgs args(DType out_dtype, std::vector<std::uint8_t>& out, std::vector<float>& lse) const {
    const int dims = layout.format.head_dim;
    out.assign(rows() * dims * dtype_size(out_dtype), 0xcd);  // poisoned: every byte must be written
    lse.assign(rows(), std::nanf(""));
    DecodeArgs a;
    a.query = {query.data(), query.size()};
    a.query_dtype = query_dtype;
    a.batch = batch;
    a.num_q_heads = num_q_heads;
    a.block_table = {block_table.data(), block_table.size() * 4};
    a.max_blocks_per_seq = max_blocks_per_seq;
    a.seq_lens = {seq_lens.data(), seq_lens.size() * 4};
    a.softmax_scale = softmax_scale;
    a.num_splits = num_splits;
    a.out = {out.data(), out.size()};
    a.out_dtype = out_dtype;
    a.lse = {lse.data(), lse.size() * 4};
    if (!rotation.empty()) a.rotation = {rotation.data(), rotation.size() * 4};
    return a;
  }
};

inline void fill_elements(std::vector<std::uint8_t>& buf, DType t, std::size_t count, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  buf.assign(count * dtype_size(t), 0);
  for (std::size_t i = 0; i < count; ++i) detail::store_element(buf.data(), t, static_cast<std::int64_t>(i), nd(rng));
}

// Random cache of either layout: code bytes uniform, FP8 keys ~ N(0, 1.5^2)
// (e4b15: N(0, 0.6^2), it holds |k| <= 1.75), metadata in realistic ranges,
// written through core::write_meta.
inline DecodeProblem make_problem(Preset preset, int head_dim, int block_size, int num_kv_heads, int group,
                                  const std::vector<int>& seq_lens, std::uint32_t seed,
                                  LayoutKind layout = LayoutKind::kSoA, Fp8Format fp8 = Fp8Format::kE4m3) {
  std::mt19937 rng(seed);
  DecodeProblem p;
  p.layout = BlockLayout{preset_format(preset, head_dim, layout, fp8), block_size, num_kv_heads};
  p.batch = static_cast<int>(seq_lens.size());
  p.num_q_heads = num_kv_heads * group;
  p.seq_lens.assign(seq_lens.begin(), seq_lens.end());
  std::int64_t needed = 0;
  int max_blocks = 1;
  for (int len : seq_lens) {
    const int blocks = (len + block_size - 1) / block_size;
    needed += blocks;
    max_blocks = std::max(max_blocks, blocks + 1);  // one spare column of garbage
  }
  p.num_blocks = needed + 2;  // two blocks no sequence uses
  p.max_blocks_per_seq = max_blocks;
  std::vector<std::int32_t> perm(static_cast<std::size_t>(p.num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  p.block_table.assign(std::size_t(p.batch) * max_blocks, -7);  // entries past a sequence must not be read
  std::size_t next = 0;
  for (int b = 0; b < p.batch; ++b) {
    const int blocks = (seq_lens[b] + block_size - 1) / block_size;
    for (int j = 0; j < blocks; ++j) p.block_table[std::size_t(b) * max_blocks + j] = perm[next++];
  }
  const BlockLayout& l = p.layout;
  p.cache.assign(static_cast<std::size_t>(p.num_blocks * l.block_bytes()), 0);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> norm(0.5f, 2.0f), scale(0.01f, 0.3f), zero(-1.2f, 0.0f);
  for (std::int64_t blk = 0; blk < p.num_blocks; ++blk) {
    std::uint8_t* block = p.cache.data() + l.block_base(blk);
    // SoA: the data region; AoS: every slot (the metadata is rewritten below).
    for (std::int64_t i = 0; i < l.meta_offset(); ++i) block[i] = static_cast<std::uint8_t>(byte(rng));
    for (int t = 0; t < block_size; ++t) {
      for (int h = 0; h < num_kv_heads; ++h) {
        if (l.format.fp8_keys()) {  // realistic magnitudes (raw random bytes reach +-448)
          std::uint8_t* k = block + l.key_data_offset(t, h);
          std::normal_distribution<float> key(0.0f, fp8 == Fp8Format::kE4b15 ? 0.6f : 1.5f);
          for (int d = 0; d < head_dim; ++d) k[d] = core::float_to_fp8(fp8, key(rng));
        } else {
          core::write_meta(l, block, t, h, MetaField::kKeyNorm, norm(rng));
        }
        core::write_meta(l, block, t, h, MetaField::kValueScale, scale(rng));
        core::write_meta(l, block, t, h, MetaField::kValueZero, zero(rng));
      }
    }
  }
  fill_elements(p.query, p.query_dtype, p.rows() * head_dim, rng, 1.0f);
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return p;
}

inline void set_query_dtype(DecodeProblem& p, DType t, std::uint32_t seed) {
  std::mt19937 rng(seed);
  p.query_dtype = t;
  fill_elements(p.query, t, p.rows() * p.layout.format.head_dim, rng, 1.0f);
}

// Output as floats (widened from out_dtype).
inline std::vector<float> widen(const std::vector<std::uint8_t>& out, DType t) {
  std::vector<float> r(out.size() / dtype_size(t));
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = detail::load_element(out.data(), t, static_cast<std::int64_t>(i));
  return r;
}

inline double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

// Index of the first differing byte, or -1.
inline std::int64_t first_difference(const void* a, const void* b, std::size_t bytes) {
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (x[i] != y[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

inline std::string describe(const DecodeProblem& p) {
  char buf[256];
  const Format& f = p.layout.format;
  std::snprintf(buf, sizeof buf, "%s K%dV%d%s D=%d bs=%d Hk=%d Hq=%d B=%d splits=%d q=%s", core::layout_name(f.layout),
                f.key_bits, f.value_bits, f.fp8_keys() ? (std::string(" ") + core::fp8_format_name(f.fp8_format)).c_str() : "",
                f.head_dim, p.layout.block_size, p.layout.num_kv_heads, p.num_q_heads, p.batch, p.num_splits,
                dtype_name(p.query_dtype));
  return buf;
}

// Sets a process-wide plan policy (decode_setup.hpp's getters and setters) for
// a scope and puts the previous value back on the way out, also when an
// assertion returns early.
template <class V>
class PolicyScope {
 public:
  PolicyScope(V (*get)(), void (*set)(V), V value) : set_(set), before_(get()) { set_(value); }
  ~PolicyScope() { set_(before_); }
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  void (*set_)(V);
  V before_;
};

}  // namespace tq_gpu_test
