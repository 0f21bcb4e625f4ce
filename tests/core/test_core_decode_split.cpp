// core::score_token and core::decode_split against the steps they are made
// of, composed one by one as the golden decode wrote them before, on caches
// written by core::encode_token_head.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "turboquant/core/decode_split.hpp"

namespace turboquant::core {
namespace {

struct Case {
  Preset preset;
  int head_dim;
  int block_size;
  int num_kv_heads;
  int group;
  LayoutKind layout = LayoutKind::kSoA;
  Fp8Format fp8 = Fp8Format::kE4m3;
};

class DecodeSplitTest : public ::testing::TestWithParam<Case> {};

Codebook test_codebook(int bits) {
  float c[kMaxCodebookSize];
  for (int i = 0; i < (1 << bits); ++i) c[i] = (static_cast<float>(i) - ((1 << bits) - 1) * 0.5f) * 0.11f;
  return make_codebook(bits, c);
}

TEST_P(DecodeSplitTest, EqualsTheComposedSteps) {
  const Case c = GetParam();
  const BlockLayout l{preset_format(c.preset, c.head_dim, c.layout, c.fp8), c.block_size, c.num_kv_heads};
  ASSERT_EQ(layout_problem(l), nullptr);
  const int dims = c.head_dim;
  const int seq_len = 3 * c.block_size + 5;
  const int blocks = (seq_len + c.block_size - 1) / c.block_size;
  const Codebook cb = test_codebook(l.format.fp8_keys() ? 4 : l.format.key_bits);
  std::mt19937 rng(static_cast<unsigned>(dims * 7 + c.block_size));
  std::normal_distribution<float> nd;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>((blocks + 1) * l.block_bytes()));
  std::vector<std::int32_t> block_row(static_cast<std::size_t>(blocks));
  for (int i = 0; i < blocks; ++i) block_row[static_cast<std::size_t>(i)] = blocks - i;  // scattered, block 0 unused
  std::vector<float> k(dims), v(dims);
  for (int token = 0; token < seq_len; ++token) {
    std::uint8_t* block = cache.data() + l.block_base(block_row[static_cast<std::size_t>(token / c.block_size)]);
    for (int h = 0; h < c.num_kv_heads; ++h) {
      for (int d = 0; d < dims; ++d) k[d] = nd(rng), v[d] = nd(rng);
      encode_token_head(l, block, token % c.block_size, h, k.data(), v.data(), cb, Rotation{});
    }
  }
  std::vector<float> queries(static_cast<std::size_t>(c.group) * dims);
  for (float& q : queries) q = nd(rng);
  const int h = c.num_kv_heads - 1;
  const TokenRange range{2, seq_len};  // starts inside the first block

  // score_token == direction, norm, dot16, key_score.
  std::vector<float> key(dims), want_key(dims);
  std::vector<float> scores(static_cast<std::size_t>(c.group) * 3);
  for (int token = range.begin; token < range.end; ++token) {
    const std::uint8_t* block = cache.data() + l.block_base(block_row[static_cast<std::size_t>(token / c.block_size)]);
    const int t = token % c.block_size;
    score_token(l, block, t, h, cb, queries.data(), c.group, key.data(), scores.data(), 3);
    decode_key_direction(l, block, t, h, cb, want_key.data());
    const float norm = decode_key_norm(l, block, t, h, want_key.data());
    for (int g = 0; g < c.group; ++g) {
      const float want = key_score(l.format, dot16(&queries[static_cast<std::size_t>(g) * dims], want_key.data(), dims), norm);
      ASSERT_EQ(float_bits(scores[static_cast<std::size_t>(g) * 3]), float_bits(want)) << token << " " << g;
    }
  }

  // decode_split == tiles of fold + rescale + accumulate (acc rows padded to check the stride).
  const std::int64_t stride = dims + 16;
  std::vector<float> acc(static_cast<std::size_t>(c.group * stride), 7.0f);
  std::vector<SoftmaxState> states(static_cast<std::size_t>(c.group));
  std::vector<float> scratch(static_cast<std::size_t>(decode_split_scratch_floats(c.group, dims)));
  decode_split(l, cache.data(), block_row.data(), h, range, cb, queries.data(), c.group, states.data(), acc.data(),
               stride, scratch.data());
  std::vector<float> value(dims);
  for (int g = 0; g < c.group; ++g) {
    SoftmaxState st;
    std::vector<float> want(dims, 0.0f);
    for (int tile = range.begin; tile < range.end; tile += kTileTokens) {
      const int n = range.end - tile < kTileTokens ? range.end - tile : kTileTokens;
      float s[kTileTokens], p[kTileTokens];
      for (int i = 0; i < n; ++i) {
        const int token = tile + i;
        const std::uint8_t* block = cache.data() + l.block_base(block_row[static_cast<std::size_t>(token / c.block_size)]);
        decode_key_direction(l, block, token % c.block_size, h, cb, want_key.data());
        const float dot = dot16(&queries[static_cast<std::size_t>(g) * dims], want_key.data(), dims);
        s[i] = key_score(l.format, dot, decode_key_norm(l, block, token % c.block_size, h, want_key.data()));
      }
      const float alpha = softmax_fold_tile(st, s, n, p);
      for (float& a : want) a = rescale(a, alpha);
      for (int i = 0; i < n; ++i) {
        const int token = tile + i;
        const std::uint8_t* block = cache.data() + l.block_base(block_row[static_cast<std::size_t>(token / c.block_size)]);
        decode_value(l, block, token % c.block_size, h, value.data());
        for (int d = 0; d < dims; ++d) want[d] = accumulate(want[d], p[i], value[d]);
      }
    }
    ASSERT_EQ(float_bits(states[g].max), float_bits(st.max)) << g;
    ASSERT_EQ(float_bits(states[g].sum), float_bits(st.sum)) << g;
    for (int d = 0; d < dims; ++d) ASSERT_EQ(float_bits(acc[g * stride + d]), float_bits(want[d])) << g << " " << d;
    for (int d = dims; d < stride; ++d) ASSERT_EQ(acc[g * stride + d], 7.0f) << "padding written";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DecodeSplitTest,
                         ::testing::Values(Case{Preset::k4BitNc, 128, 16, 2, 4}, Case{Preset::kK3V4Nc, 64, 5, 3, 1},
                                           Case{Preset::k3BitNc, 256, 16, 1, 3}, Case{Preset::kK8V4, 64, 7, 2, 2},
                                           Case{Preset::k4BitNc, 128, 16, 2, 4, LayoutKind::kAoS},
                                           Case{Preset::kK3V4Nc, 64, 5, 3, 1, LayoutKind::kAoS},
                                           Case{Preset::k3BitNc, 256, 16, 1, 3, LayoutKind::kAoS},
                                           Case{Preset::kK8V4, 64, 7, 2, 2, LayoutKind::kAoS},
                                           Case{Preset::kK8V4, 64, 7, 2, 2, LayoutKind::kAoS, Fp8Format::kE4b15}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(preset_name(i.param.preset)) + "_d" + std::to_string(i.param.head_dim) +
                                  "_bs" + std::to_string(i.param.block_size) + "_" + layout_name(i.param.layout) +
                                  (i.param.fp8 == Fp8Format::kE4b15 ? "_e4b15" : "");
                         });

}  // namespace
}  // namespace turboquant::core
