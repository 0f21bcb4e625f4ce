// Determinism: 100 repeated decodes with varying thread counts (1..8) and
// every ISA give identical bits, equal to the golden model's; repeated
// encodes give identical bytes.
#include <gtest/gtest.h>

#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

tqt::Problem problem() {
  tqt::ProblemSpec spec;
  spec.format = core::preset_format(Preset::k4BitNc, 128);
  spec.num_kv_heads = 4;
  spec.group = 4;
  spec.seq_lens = {700, 1, 333, 64, 0, 1500};
  spec.seed = seed(71);
  return tqt::make_problem(spec);
}

TEST(Determinism, HundredDecodesWithVaryingThreadCountsAreBitIdentical) {
  const tqt::Problem p = problem();
  std::vector<float> want_out, want_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse, 16)).ok());
  int runs = 0;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> out, lse;
    const DecodeArgs a = p.args(out, lse, 16);
#if TQ_REL_HAVE_CPU
    const std::vector<std::string> isas = available_isas();
    CpuOptions o;
    o.threads = 1 + i % 8;
    o.isa = isas[(i / 8) % isas.size()];
    const Status s = decode_cpu(p.view(), a, o);
    const std::string what = "decode_cpu threads " + std::to_string(o.threads) + " isa " + o.isa;
#else
    const Status s = decode_reference(p.view(), a);
    const std::string what = "decode_reference";
#endif
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    ASSERT_TRUE(bits_equal(out, want_out)) << "run " << i << " (" << what << ") differs";
    ASSERT_TRUE(bits_equal(lse, want_lse)) << "run " << i << " (" << what << ") differs";
    ++runs;
  }
  EXPECT_EQ(runs, 100);
}

TEST(Determinism, RepeatedEncodesWriteIdenticalBytes) {
  const tqt::Problem p = problem();
  EncodeArgs e;
  e.keys = {p.keys.data(), p.keys.size() * 4};
  e.values = {p.values.data(), p.values.size() * 4};
  e.num_tokens = static_cast<std::int64_t>(p.slots.size());
  e.slot_mapping = {p.slots.data(), p.slots.size() * 8};
  for (int i = 0; i < 16; ++i) {
    std::vector<std::uint8_t> cache(p.cache.size(), 0);
#if TQ_REL_HAVE_CPU
    CpuOptions o;
    o.threads = 1 + i % 8;
    o.isa = available_isas()[i % available_isas().size()];
    ASSERT_TRUE(encode_cpu(CacheView{p.layout, cache.data(), p.num_blocks}, e, o).ok());
#else
    ASSERT_TRUE(encode_reference(CacheView{p.layout, cache.data(), p.num_blocks}, e).ok());
#endif
    ASSERT_TRUE(cache == p.cache) << "encode run " << i;
  }
}

}  // namespace
}  // namespace tq_rel
