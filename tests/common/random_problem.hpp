// Random decode problems for tests and benchmarks: random K/V encoded into a
// cache through a shuffled block table, random queries. Header-only so that
// every test area and bench binary can use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "turboquant/decode.hpp"
#include "turboquant/detail/elements.hpp"
#include "turboquant/encode.hpp"

namespace turboquant::testing {

// The bytes of a host vector, as the API's buffers.
template <class T>
ConstBuffer bytes_of(const std::vector<T>& v) {
  return {v.data(), v.size() * sizeof(T)};
}
template <class T>
MutableBuffer writable_bytes_of(std::vector<T>& v) {
  return {v.data(), v.size() * sizeof(T)};
}

// A decode call over host buffers: fp32 query and out unless the caller sets
// the dtypes, the default codebook and rotation. One place for every test
// that builds DecodeArgs field by field.
inline DecodeArgs host_decode_args(ConstBuffer query, int batch, int num_q_heads, ConstBuffer block_table,
                                   int max_blocks_per_seq, ConstBuffer seq_lens, float softmax_scale, int num_splits,
                                   MutableBuffer out, MutableBuffer lse) {
  DecodeArgs a;
  a.query = query;
  a.batch = batch;
  a.num_q_heads = num_q_heads;
  a.block_table = block_table;
  a.max_blocks_per_seq = max_blocks_per_seq;
  a.seq_lens = seq_lens;
  a.softmax_scale = softmax_scale;
  a.num_splits = num_splits;
  a.out = out;
  a.lse = lse;
  return a;
}

// An encode call over host K/V bytes of `dtype`, one token per entry of `slots`.
inline EncodeArgs host_encode_args(ConstBuffer keys, ConstBuffer values, DType dtype,
                                   const std::vector<std::int64_t>& slots) {
  EncodeArgs e;
  e.keys = keys;
  e.values = values;
  e.dtype = dtype;
  e.num_tokens = static_cast<std::int64_t>(slots.size());
  e.slot_mapping = bytes_of(slots);
  return e;
}

// What a name adds for a format beyond its numbers: "" for SoA with e4m3
// keys (the names tests had before the AoS layout), else "_aos" and/or
// "_e4b15" (the FP8 flavour, FP8 keys only).
inline std::string format_suffix(const Format& f) {
  std::string s = f.aos() ? "_aos" : "";
  if (f.fp8_keys() && f.fp8_format == Fp8Format::kE4b15) s += "_e4b15";
  return s;
}

struct ProblemSpec {
  Format format = core::preset_format(Preset::k4BitNc, 128);
  int block_size = 16;
  int num_kv_heads = 2;
  int group = 4;  // Hq / Hk
  std::vector<int> seq_lens = {37};
  std::uint32_t seed = 1;
  float key_scale = 1.0f;    // keys ~ N(0, key_scale^2)
  float query_scale = 1.0f;  // queries ~ N(0, query_scale^2)
  int extra_blocks = 3;      // unused blocks that tables must never reach

  std::string name() const {
    std::string s = std::string("K") + std::to_string(format.key_bits) + "V" + std::to_string(format.value_bits) + "_D" +
                    std::to_string(format.head_dim) + "_bs" + std::to_string(block_size) + "_hk" +
                    std::to_string(num_kv_heads) + "_g" + std::to_string(group) + "_seq";
    for (int l : seq_lens) s += std::string("-") + std::to_string(l);
    return s + format_suffix(format) + "_seed" + std::to_string(seed);
  }
};

struct Problem {
  ProblemSpec spec;
  BlockLayout layout;
  int batch = 0;
  int num_q_heads = 0;
  int max_blocks = 0;
  std::int64_t num_blocks = 0;
  std::vector<std::uint8_t> cache;
  std::vector<std::int32_t> block_table;
  std::vector<std::int32_t> seq_lens;
  std::vector<float> query;  // [B, Hq, D]
  std::vector<float> keys;   // [N, Hk, D] as stored, N = sum of seq_lens
  std::vector<float> values;
  std::vector<std::int64_t> slots;  // [N]
  float scale = 0.0f;

  ConstCacheView view() const { return ConstCacheView(layout, cache.data(), num_blocks); }

  // Decode arguments writing fp32 out [B, Hq, D] and lse [B, Hq].
  DecodeArgs args(std::vector<float>& out, std::vector<float>& lse, int splits = 32) const {
    const int dims = layout.format.head_dim;
    out.assign(static_cast<std::size_t>(batch) * num_q_heads * dims, -7.0f);
    lse.assign(static_cast<std::size_t>(batch) * num_q_heads, -7.0f);
    return host_decode_args(bytes_of(query), batch, num_q_heads, bytes_of(block_table), max_blocks, bytes_of(seq_lens),
                            scale, splits, writable_bytes_of(out), writable_bytes_of(lse));
  }

  // Encode arguments storing the fp32 keys and values at `slots`.
  EncodeArgs encode_args() const { return host_encode_args(bytes_of(keys), bytes_of(values), DType::kFloat32, slots); }
};

inline Problem make_problem(const ProblemSpec& spec) {
  Problem p;
  p.spec = spec;
  p.layout = BlockLayout{spec.format, spec.block_size, spec.num_kv_heads};
  const int dims = spec.format.head_dim;
  p.batch = static_cast<int>(spec.seq_lens.size());
  p.num_q_heads = spec.num_kv_heads * spec.group;
  p.seq_lens.assign(spec.seq_lens.begin(), spec.seq_lens.end());
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  std::vector<int> blocks_per_seq;
  int total_blocks = 0;
  for (int len : spec.seq_lens) {
    blocks_per_seq.push_back((len + spec.block_size - 1) / spec.block_size);
    total_blocks += blocks_per_seq.back();
    p.max_blocks = std::max(p.max_blocks, blocks_per_seq.back());
  }
  p.max_blocks += 1;  // a spare column: entries past a sequence's end point at an unused block
  p.num_blocks = total_blocks + spec.extra_blocks;
  std::vector<std::int32_t> physical(static_cast<std::size_t>(p.num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  p.block_table.assign(static_cast<std::size_t>(p.batch) * p.max_blocks, physical.back());  // unused block
  int next = 0;
  for (int b = 0; b < p.batch; ++b) {
    for (int j = 0; j < blocks_per_seq[b]; ++j) p.block_table[b * p.max_blocks + j] = physical[next++];
  }
  p.cache.assign(static_cast<std::size_t>(p.num_blocks * p.layout.block_bytes()), 0);
  for (int b = 0; b < p.batch; ++b) {
    for (int t = 0; t < spec.seq_lens[b]; ++t) {
      p.slots.push_back(std::int64_t{p.block_table[b * p.max_blocks + t / spec.block_size]} * spec.block_size +
                        t % spec.block_size);
    }
  }
  const std::size_t n = p.slots.size();
  p.keys.resize(n * spec.num_kv_heads * dims);
  p.values.resize(p.keys.size());
  for (float& k : p.keys) k = normal(rng) * spec.key_scale;
  for (float& v : p.values) v = normal(rng);
  p.query.resize(static_cast<std::size_t>(p.batch) * p.num_q_heads * dims);
  for (float& q : p.query) q = normal(rng) * spec.query_scale;
  p.scale = 1.0f / std::sqrt(static_cast<float>(dims));

  const Status s = encode_reference(CacheView{p.layout, p.cache.data(), p.num_blocks}, p.encode_args());
  if (!s.ok()) std::fprintf(stderr, "make_problem(%s): %s\n", spec.name().c_str(), s.to_string().c_str());
  return p;
}

// A problem of the default shape (ProblemSpec's) over `seq_lens`.
inline Problem make_problem(std::vector<int> seq_lens, std::uint32_t seed) {
  ProblemSpec spec;
  spec.seq_lens = std::move(seq_lens);
  spec.seed = seed;
  return make_problem(spec);
}

// x narrowed to dtype `t` (round to nearest even; fp32 as is), as raw bytes:
// K/V inputs of another dtype for the encoders.
inline std::vector<std::uint8_t> as_dtype_bytes(const std::vector<float>& x, DType t) {
  std::vector<std::uint8_t> out(x.size() * dtype_size(t));
  for (std::size_t i = 0; i < x.size(); ++i) detail::store_element(out.data(), t, static_cast<std::int64_t>(i), x[i]);
  return out;
}

// Relative L2 error ||got - want|| / ||want|| (0 when both are 0).
template <class A, class B>
double rel_l2(const A& got, const B& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += d * d;
    den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace turboquant::testing
