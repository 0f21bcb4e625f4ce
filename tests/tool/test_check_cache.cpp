// turboquant::check's validate_cache: every shared vLLM cache is explained by
// boundary flips (exact counts: store_cases.hpp), and each deliberate
// corruption of one is reported as exactly one wrong element at the right
// block, position, head, field and dim; bad arguments are a Status naming them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "store_cases.hpp"
#include "turboquant/check/case_inputs.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant::checks {
namespace {

using tq_test::kStoreCases;
using tq_test::StoreCase;

TEST(BoundaryHelpers, UlpsAndFp16Steps) {
  EXPECT_EQ(core::fp32_ulp(1.0), 0x1p-23);
  EXPECT_EQ(core::fp32_ulp(-3.0), 0x1p-22);
  EXPECT_EQ(core::fp32_ulp(16.0), 0x1p-19);
  EXPECT_EQ(core::fp32_ulp(0.0), 0x1p-149);
  EXPECT_EQ(core::fp32_ulp(0x1p-130), 0x1p-149);
  // scale 0.5, zero 1: (2.25 - 1) / 0.5 + 0.5 = 3 exactly, the boundary between codes 2 and 3.
  const core::ValueParams p{0.5f, 1.0f};
  EXPECT_EQ(core::exact_value_code_argument(2.25f, p), 3.0);
  EXPECT_EQ(core::value_boundary_ulps(2.25f, p, 2), 0.0);
  EXPECT_EQ(core::value_boundary_ulps(2.25f, p, 3), 1.0 / 0x1p-21);  // 1 from the boundary 4
  EXPECT_EQ(core::fp16_steps_apart(0x3c00, 0x3c01), 1);
  EXPECT_EQ(core::fp16_steps_apart(0x0001, 0x8001), 2);
  EXPECT_EQ(core::fp16_steps_apart(0x0000, 0x8000), 0);
  EXPECT_EQ(core::fp16_steps_apart(0x7bff, 0x7c00), -1);  // 65504 vs inf (gh-53334) is never one ulp
  // The exact rotation of a basis vector: H e_0 / sqrt(D) = 1/sqrt(D) everywhere.
  float k[64] = {};
  k[0] = 2.0f;
  double y[64];
  core::exact_rotated_direction(core::Rotation{}, k, 64, y);
  for (double x : y) EXPECT_NEAR(x, 0.125 * 2.0 / (2.0 + 1e-8), 1e-17);
}

class StoreCaseTest : public ::testing::TestWithParam<StoreCase> {
 protected:
  void SetUp() override {
    io::CaseLoadOptions load = io::CaseLoadOptions::encode();
    load.kv_cache = io::Need::kRequired;
    const Status s = io::load_case(tq_test::store_case_path(GetParam()).string(), load, &c_);
    ASSERT_TRUE(s.ok()) << s.to_string();
    if (!c_.format.fp8_keys()) {
      ASSERT_TRUE(make_codebook(c_.format.key_bits, c_.centroids.values, &codebook_).ok());
    }
    cache_ = c_.kv_cache.values;
  }

  CacheReport check(int max_report = 20) const {
    CacheCheckInputs in = case_cache_check_inputs(c_, c_.format.fp8_keys() ? nullptr : &codebook_,
                                                  ConstCacheView(c_.layout, cache_.data(), c_.num_blocks), "cache");
    in.max_report = max_report;
    CacheReport r;
    const Status s = validate_cache(in, &r);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return r;
  }

  io::CaseDir c_;
  Codebook codebook_;
  std::vector<std::uint8_t> cache_;
};

TEST_P(StoreCaseTest, EveryDifferenceIsExplained) {
  const CacheReport r = check();
  EXPECT_TRUE(r.pass) << render_cache_report(r);
  EXPECT_EQ(r.wrong, 0);
  const Format& f = c_.format;
  EXPECT_EQ(r.tokens, c_.num_tokens);
  EXPECT_EQ(r.at(CacheField::kValueCodes).boundary_flip, GetParam().value_code_flips);
  EXPECT_EQ(r.at(CacheField::kValueCodes).identical + GetParam().value_code_flips, r.written_slots * f.head_dim);
  EXPECT_EQ(r.at(CacheField::kKeyCodes).boundary_flip, 0);  // the dense rotation flipped no key code here
  EXPECT_EQ(r.at(CacheField::kKeyNorm).one_ulp, GetParam().key_norm_one_ulp);
  EXPECT_EQ(r.at(CacheField::kValueScale).one_ulp + r.at(CacheField::kValueZero).one_ulp, 0);
  EXPECT_LE(r.at(CacheField::kValueCodes).worst_flip_ulps, 1.0);  // measured 0.25 .. 0.6
  if (f.fp8_keys()) {
    EXPECT_EQ(r.at(CacheField::kFp8Key).identical, r.written_slots * f.head_dim);
  } else {
    EXPECT_EQ(r.at(CacheField::kKeyCodes).identical, r.written_slots * f.head_dim);
  }
  EXPECT_GT(r.at(CacheField::kUntouched).identical, 0);
  std::printf("[ numbers  ] %s: value code flips %lld (worst %.3g ulps), key norm 1 ulp %lld\n", GetParam().dir,
              static_cast<long long>(r.at(CacheField::kValueCodes).boundary_flip),
              r.at(CacheField::kValueCodes).worst_flip_ulps,
              static_cast<long long>(r.at(CacheField::kKeyNorm).one_ulp));
}

// One corruption of vLLM's cache at a time; the golden store picks dims where
// vLLM and the golden model agree, so the corruption is the only difference there.
class StoreCaseCorruption : public StoreCaseTest {
 protected:
  void SetUp() override {
    StoreCaseTest::SetUp();
    if (HasFatalFailure()) return;
    const BlockLayout& l = c_.layout;
    golden_.assign(cache_.size(), 0);
    ASSERT_TRUE(encode_reference(CacheView{l, golden_.data(), c_.num_blocks}, io::case_encode_args(c_, nullptr)).ok());
    token_ = c_.num_tokens / 2;
    const std::int64_t slot = c_.slot_mapping.values[static_cast<std::size_t>(token_)];
    ASSERT_GE(slot, 0);
    block_ = slot / l.block_size;
    t_ = static_cast<int>(slot % l.block_size);
    h_ = l.num_kv_heads - 1;
    base_ = l.block_base(block_);
  }

  // The first dim >= 5 whose code (bits, packed at `at`) vLLM and the golden model agree on.
  int agreeing_dim(int bits, std::int64_t at) const {
    for (int d = 5; d < c_.head_dim(); ++d) {
      if (core::unpack_code(bits, &cache_[at], d) == core::unpack_code(bits, &golden_[at], d)) return d;
    }
    ADD_FAILURE() << "no agreeing dim";
    return 0;
  }

  // Sets code d of the packed field at `at`; returns the old code.
  int set_code(int bits, std::int64_t at, int d, int code) {
    std::uint8_t codes[core::kMaxHeadDim];
    core::unpack_codes(bits, &cache_[at], c_.head_dim(), codes);
    const int old = codes[d];
    codes[d] = static_cast<std::uint8_t>(code);
    core::pack_codes(bits, codes, c_.head_dim(), &cache_[at]);
    return old;
  }

  // Exactly one wrong element, at (block_, t_, h_) unless given.
  void expect_one_wrong(CacheField field, int dim) {
    expect_one_wrong_at(field, dim, block_, t_, h_, token_);
  }
  void expect_one_wrong_at(CacheField field, int dim, std::int64_t block, int t, int h, std::int64_t token) {
    const CacheReport r = check();
    EXPECT_FALSE(r.pass);
    EXPECT_EQ(r.wrong, 1) << render_cache_report(r);
    EXPECT_EQ(r.at(field).wrong, 1);
    ASSERT_EQ(r.wrong_items.size(), 1u);
    const CacheItem& it = r.wrong_items[0];
    EXPECT_EQ(it.block, block);
    EXPECT_EQ(it.position, t);
    EXPECT_EQ(it.head, h);
    EXPECT_EQ(it.field, field) << cache_field_name(it.field);
    EXPECT_EQ(it.dim, dim);
    EXPECT_EQ(it.token, token);
    last_ = it;
  }

  std::int64_t meta_at(MetaField m) const { return base_ + c_.layout.meta_field_offset(t_, h_, m); }

  std::vector<std::uint8_t> golden_;
  std::int64_t token_ = 0, block_ = 0, base_ = 0;
  int t_ = 0, h_ = 0;
  CacheItem last_;
};

TEST_P(StoreCaseCorruption, KeyCodeTwoStepsAndOneStepOffBoundary) {
  if (c_.format.fp8_keys()) GTEST_SKIP() << "FP8 keys";
  const int bits = c_.format.key_bits;
  const std::int64_t at = base_ + c_.layout.key_data_offset(t_, h_);
  const int d = agreeing_dim(bits, at);
  const std::vector<std::uint8_t> pristine = cache_;
  const int code = set_code(bits, at, d, 0);
  set_code(bits, at, d, code ^ 2);  // one bit of the code: two steps
  expect_one_wrong(CacheField::kKeyCodes, d);
  EXPECT_EQ(last_.golden, code);
  EXPECT_EQ(last_.got, code ^ 2);
  EXPECT_EQ(last_.boundary_ulps, -1);
  cache_ = pristine;
  set_code(bits, at, d, code ^ 1);  // one step, but y is far from the midpoint
  expect_one_wrong(CacheField::kKeyCodes, d);
  EXPECT_GT(last_.boundary_ulps, 1000) << describe_item(last_);
}

TEST_P(StoreCaseCorruption, ValueCodeTwoSteps) {
  const int bits = c_.format.value_bits;
  const std::int64_t at = base_ + c_.layout.value_data_offset(t_, h_);
  const int d = agreeing_dim(bits, at);
  const int code = set_code(bits, at, d, 0);
  set_code(bits, at, d, code ^ 2);
  expect_one_wrong(CacheField::kValueCodes, d);
  EXPECT_EQ(last_.golden, code);
  EXPECT_NE(describe_item(last_).find("value codes dim " + std::to_string(d)), std::string::npos);
}

TEST_P(StoreCaseCorruption, KeyNormByte) {
  if (c_.format.fp8_keys()) GTEST_SKIP() << "FP8 keys: no norm";
  cache_[meta_at(MetaField::kKeyNorm) + 1] ^= 0x40;  // an exponent bit of the fp16
  expect_one_wrong(CacheField::kKeyNorm, -1);
}

TEST_P(StoreCaseCorruption, ValueScaleAndZero) {
  const std::vector<std::uint8_t> pristine = cache_;
  cache_[meta_at(MetaField::kValueScale) + 1] ^= 0x04;  // the lowest exponent bit
  expect_one_wrong(CacheField::kValueScale, -1);
  cache_ = pristine;
  cache_[meta_at(MetaField::kValueZero) + 1] ^= 0x80;  // the sign
  expect_one_wrong(CacheField::kValueZero, -1);
  // The lowest mantissa bit is one fp16 ulp: counted, not wrong.
  cache_ = pristine;
  cache_[meta_at(MetaField::kValueScale)] ^= 0x01;
  const CacheReport r = check();
  EXPECT_TRUE(r.pass);
  EXPECT_EQ(r.at(CacheField::kValueScale).one_ulp, 1);
}

TEST_P(StoreCaseCorruption, Fp8KeyByte) {
  if (!c_.format.fp8_keys()) GTEST_SKIP() << "Lloyd-Max keys";
  const int d = 9;
  const std::int64_t at = base_ + c_.layout.key_data_offset(t_, h_) + d;
  ASSERT_EQ(cache_[at], golden_[at]);
  cache_[at] ^= 0x01;  // even the lowest bit: FP8 bytes have no tolerance
  expect_one_wrong(CacheField::kFp8Key, d);
}

TEST_P(StoreCaseCorruption, ByteOfAnUnwrittenSlot) {
  const BlockLayout& l = c_.layout;
  std::vector<bool> written(static_cast<std::size_t>(c_.num_blocks * l.block_size), false);
  for (std::int64_t s : c_.slot_mapping.values) {
    if (s >= 0) written[static_cast<std::size_t>(s)] = true;
  }
  std::int64_t slot = 0;
  while (written[static_cast<std::size_t>(slot)]) ++slot;
  const std::int64_t block = slot / l.block_size;
  const int t = static_cast<int>(slot % l.block_size);
  cache_[l.block_base(block) + l.value_data_offset(t, 0) + 3] = 0x5a;
  expect_one_wrong_at(CacheField::kUntouched, 3, block, t, 0, -1);
  EXPECT_EQ(last_.within, CacheField::kValueCodes);
  EXPECT_EQ(last_.got, 0x5a);
  EXPECT_EQ(last_.golden, 0);
}

TEST_P(StoreCaseCorruption, ManyWrongOnlyTheFirstListed) {
  for (std::size_t i = 0; i < 100; ++i) cache_[cache_.size() - 1 - i] ^= 0xff;  // the last block's bytes
  const CacheReport r = check(3);
  EXPECT_FALSE(r.pass);
  EXPECT_GE(r.wrong, 30);  // a code byte holds 2 (4-bit) or 2-3 (3-bit) codes; some bytes may be unwritten
  EXPECT_EQ(r.wrong_items.size(), 3u);
  EXPECT_EQ(r.wrong_items[0].block, c_.num_blocks - 1);
  EXPECT_NE(render_cache_report(r).find("wrong elements (first 3 of "), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Cases, StoreCaseTest, ::testing::ValuesIn(kStoreCases),
                         [](const auto& info) { return tq_test::store_case_id(info.param); });
INSTANTIATE_TEST_SUITE_P(Cases, StoreCaseCorruption, ::testing::ValuesIn(kStoreCases),
                         [](const auto& info) { return tq_test::store_case_id(info.param); });

TEST(ValidateCacheArguments, BadInputIsAStatusNamingIt) {
  io::CaseDir c;
  io::CaseLoadOptions load = io::CaseLoadOptions::encode();
  load.kv_cache = io::Need::kRequired;
  ASSERT_TRUE(io::load_case(tq_test::store_case_path(kStoreCases[0]).string(), load, &c).ok());
  const ConstCacheView cache(c.layout, c.kv_cache.data(), c.num_blocks);
  const auto message = [&](CacheCheckInputs in) {
    CacheReport r;
    const Status s = validate_cache(in, &r);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  const CacheCheckInputs good = case_cache_check_inputs(c, nullptr, cache, "kv_cache.npy");
  {
    CacheReport r;
    EXPECT_TRUE(validate_cache(good, &r).ok());  // null codebook: vLLM's, the same as centroids.npy
    EXPECT_TRUE(r.pass);
  }
  EXPECT_FALSE(validate_cache(good, nullptr).ok());
  CacheCheckInputs in = good;
  in.boundary_ulps = -1;
  EXPECT_NE(message(in).find("boundary_ulps"), std::string::npos);
  in = good;
  in.max_report = -2;
  EXPECT_NE(message(in).find("max_report = -2"), std::string::npos);
  in = good;
  in.original.keys = in.original.keys.first(in.original.keys.size() - 1);
  EXPECT_NE(message(in).find("keys"), std::string::npos);
  std::vector<std::int64_t> slots = c.slot_mapping.values;
  slots[4] = c.num_blocks * c.block_size();  // one past the cache
  in = good;
  in.original.slot_mapping = slots;
  EXPECT_NE(message(in).find("slot_mapping"), std::string::npos);
  in = good;
  in.cache.num_blocks = 2;  // the tokens' slots lie beyond a smaller cache
  EXPECT_NE(message(in).find("slot_mapping"), std::string::npos);
}

}  // namespace
}  // namespace turboquant::checks
