// The golden model against real vLLM caches and outputs (tests/data/vllm-soa,
// copied from ../shared/cases: produced by vLLM's Triton kernels on an H200).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "common/random_problem.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant {
namespace {

const char* kCases[] = {"s01_4bit_nc_d128_bs16_gqa4", "s02_k8v4_d128_bs16_gqa4", "s03_k3v4_nc_d64_bs32_mha",
                        "s04_3bit_nc_d256_bs16_gqa8", "s05_4bit_nc_d128_bs64_sharp"};

io::CaseDir load(const std::string& name) {
  io::CaseDir c;
  const Status s = io::load_case(std::string(TQ_TEST_DATA_DIR) + "/vllm-soa/" + name, io::CaseLoadOptions::all_required(), &c);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

class VllmCase : public ::testing::TestWithParam<const char*> {};

// Encode the case's K/V into a zeroed cache and compare with vLLM's bytes.
TEST_P(VllmCase, EncodeReproducesVllmStore) {
  const io::CaseDir c = load(GetParam());
  const BlockLayout& l = c.layout;
  std::vector<std::uint8_t> ours(c.kv_cache.size(), 0);
  const EncodeArgs e = io::case_encode_args(c, nullptr);
  ASSERT_TRUE(encode_reference(CacheView{l, ours.data(), c.num_blocks}, e).ok());

  const std::uint8_t* theirs = c.kv_cache.data();
  std::size_t same = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) same += ours[i] == theirs[i];
  const double agree = double(same) / ours.size();
  EXPECT_GE(agree, 0.999) << GetParam();
  RecordProperty("byte_agreement", std::to_string(agree));

  const Format& f = l.format;
  const int D = f.head_dim;
  int codes_differing = 0;
  for (std::int64_t i = 0; i < c.num_tokens; ++i) {
    const std::int64_t slot = c.slot_mapping.values[i];
    const std::int64_t base = l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      bool codes_agree = true;
      // Key codes: FP8 bytes identical; Lloyd-Max indices at most one step apart.
      const std::uint8_t* ka = ours.data() + base + l.key_data_offset(t, h);
      const std::uint8_t* kb = theirs + base + l.key_data_offset(t, h);
      for (int d = 0; d < D; ++d) {
        if (f.fp8_keys()) {
          EXPECT_EQ(ka[d], kb[d]) << "fp8 key token " << i << " head " << h << " dim " << d;
          continue;
        }
        const int x = core::unpack_code(f.key_bits, ka, d), y = core::unpack_code(f.key_bits, kb, d);
        EXPECT_LE(std::abs(x - y), 1) << "key token " << i << " head " << h << " dim " << d;
        codes_agree &= x == y;
      }
      const std::uint8_t* va = ours.data() + base + l.value_data_offset(t, h);
      const std::uint8_t* vb = theirs + base + l.value_data_offset(t, h);
      for (int d = 0; d < D; ++d) {
        const int x = core::unpack_code(f.value_bits, va, d), y = core::unpack_code(f.value_bits, vb, d);
        EXPECT_LE(std::abs(x - y), 1) << "value token " << i << " head " << h << " dim " << d;
        codes_agree &= x == y;
      }
      codes_differing += !codes_agree;
      if (!codes_agree) continue;
      for (MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
        if (f.fp8_keys() && m == MetaField::kKeyNorm) continue;
        std::uint16_t a, b;
        std::memcpy(&a, ours.data() + base + l.meta_field_offset(t, h, m), 2);
        std::memcpy(&b, theirs + base + l.meta_field_offset(t, h, m), 2);
        EXPECT_LE(std::abs(int(a) - int(b)), 1) << "meta field " << int(m) << " token " << i << " head " << h;
      }
    }
  }
  RecordProperty("token_heads_with_a_differing_code", codes_differing);
}

// Decode vLLM's cache and match its fp32 decode and the float64 reference.
TEST_P(VllmCase, DecodeMatchesVllmV1AndFloat64) {
  const io::CaseDir c = load(GetParam());
  std::vector<float> out, lse;
  const DecodeArgs a = io::case_decode_args(c, nullptr, c.num_kv_splits, &out, &lse);
  const Status s = decode_reference(io::case_cache(c), a);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const double vs_v1 = testing::rel_l2(out, c.expected_out.values);
  const double vs_f64 = testing::rel_l2(out, c.reference_out_f64.values);
  EXPECT_LE(vs_v1, 1e-5) << GetParam();
  EXPECT_LE(vs_f64, 1e-5) << GetParam();
  for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(lse[i], c.expected_lse.values[i], 1e-4) << i;
  RecordProperty("rel_l2_vs_vllm_v1", std::to_string(vs_v1));
  RecordProperty("rel_l2_vs_f64", std::to_string(vs_f64));
}

INSTANTIATE_TEST_SUITE_P(Cases, VllmCase, ::testing::ValuesIn(kCases));

}  // namespace
}  // namespace turboquant
