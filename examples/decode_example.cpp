// Store 1,000 random tokens into a turboquant_4bit_nc cache and decode one
// query token against them with the golden model.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "turboquant/turboquant.hpp"

int main() {
  using namespace turboquant;
  const int head_dim = 128, kv_heads = 2, q_heads = 8, block_size = 16, tokens = 1000;
  const BlockLayout layout{preset_format(Preset::k4BitNc, head_dim), block_size, kv_heads};
  const int blocks = (tokens + block_size - 1) / block_size;
  std::vector<std::uint8_t> cache(blocks * layout.block_bytes(), 0);

  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> keys(tokens * kv_heads * head_dim), values(keys.size()), query(q_heads * head_dim);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  for (float& x : query) x = normal(rng);
  std::vector<std::int64_t> slots(tokens);
  for (int t = 0; t < tokens; ++t) slots[t] = t;  // block t / 16, offset t % 16

  EncodeArgs enc;
  enc.keys = {keys.data(), keys.size() * sizeof(float)};
  enc.values = {values.data(), values.size() * sizeof(float)};
  enc.num_tokens = tokens;
  enc.slot_mapping = {slots.data(), slots.size() * sizeof(std::int64_t)};
  check(encode_reference(CacheView{layout, cache.data(), blocks}, enc));

  std::vector<std::int32_t> table(blocks), seq_lens = {tokens};
  for (int b = 0; b < blocks; ++b) table[b] = b;
  std::vector<float> out(q_heads * head_dim), lse(q_heads);
  DecodeArgs dec;
  dec.query = {query.data(), query.size() * sizeof(float)};
  dec.batch = 1;
  dec.num_q_heads = q_heads;
  dec.block_table = {table.data(), table.size() * sizeof(std::int32_t)};
  dec.max_blocks_per_seq = blocks;
  dec.seq_lens = {seq_lens.data(), sizeof(std::int32_t)};
  dec.softmax_scale = 1.0f / std::sqrt(float(head_dim));
  dec.out = {out.data(), out.size() * sizeof(float)};
  dec.lse = {lse.data(), lse.size() * sizeof(float)};
  check(decode_reference(ConstCacheView(layout, cache.data(), blocks), dec));

  std::printf("%s: %d bytes per token-head (%.2fx smaller than bf16); out[0][0..3] = %.5f %.5f %.5f, lse[0] = %.4f\n",
              preset_name(Preset::k4BitNc), layout.format.slot_bytes(), layout.format.compression_vs_bf16(), out[0],
              out[1], out[2], lse[0]);
  return 0;
}
