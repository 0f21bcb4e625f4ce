// tq validate CASE --cache FILE, run as a user would: every shared vLLM cache
// passes with its flips counted (store_cases.hpp), corrupted copies exit 1
// naming the element, bad input exits 2 with one line naming the file.
#include <algorithm>

#include "store_cases.hpp"
#include "tq_runner.hpp"
#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/format.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;

class CacheCase : public ::testing::TestWithParam<StoreCase> {};

TEST_P(CacheCase, ValidateCachePassesWithItsFlipsCounted) {
  const fs::path dir = store_case_path(GetParam());
  const Result r = tq("validate " + q(dir) + " --cache kv_cache.npy");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS  kv_cache.npy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("value codes"), std::string::npos) << r.out;
  const Result rj = tq("validate " + q(dir) + " --cache kv_cache --json");  // a name in CASE, .npy optional
  EXPECT_EQ(rj.exit_code, 0) << rj.err;
  const json j = rj.parsed();
  EXPECT_TRUE(j["pass"].get<bool>());
  EXPECT_EQ(j["wrong"].get<int>(), 0);
  EXPECT_EQ(j["fields"]["value_codes"]["boundary_flip"].get<std::int64_t>(), GetParam().value_code_flips);
  EXPECT_LE(j["fields"]["value_codes"]["worst_flip_ulps"].get<double>(), 1.0);
  const bool fp8 = j["preset"].get<std::string>() == "turboquant_k8v4";
  EXPECT_EQ(j["fields"].contains("fp8_key"), fp8);
  if (!fp8) {
    EXPECT_EQ(j["fields"]["key_codes"]["boundary_flip"].get<int>(), 0);
    EXPECT_EQ(j["fields"]["key_norm"]["one_ulp"].get<std::int64_t>(), GetParam().key_norm_one_ulp);
  }
  for (const auto& [name, counts] : j["fields"].items()) EXPECT_EQ(counts["wrong"].get<int>(), 0) << name;
  EXPECT_TRUE(j["wrong_items"].empty());
}

INSTANTIATE_TEST_SUITE_P(Cases, CacheCase, ::testing::ValuesIn(kStoreCases),
                         [](const auto& info) { return store_case_id(info.param); });

// A copy of a case's kv_cache.npy with `edit` applied, written under the scratch dir.
template <class Edit>
fs::path corrupted(const fs::path& case_dir, const fs::path& out, Edit edit) {
  turboquant::io::NpyArray a;
  EXPECT_TRUE(turboquant::io::read_npy((case_dir / "kv_cache.npy").string(), &a).ok());
  edit(a.data);
  EXPECT_TRUE(turboquant::io::write_npy(out.string(), a).ok());
  return out;
}

// a01 (AoS 4bit_nc, block 16, Hk 2, D 128): slot_mapping[0]'s slot, head 1.
TEST(ValidateCache, CorruptionsAreLocalized) {
  const fs::path dir = scratch();
  const fs::path c = store_case_path(kStoreCases[5]);
  turboquant::io::NpyArray slots;
  ASSERT_TRUE(turboquant::io::read_npy((c / "slot_mapping.npy").string(), &slots).ok());
  std::vector<std::int64_t> sm;
  ASSERT_TRUE(turboquant::io::to_int64(slots, &sm).ok());
  const turboquant::core::BlockLayout l{
      turboquant::core::preset_format(turboquant::core::Preset::k4BitNc, 128, turboquant::core::LayoutKind::kAoS), 16,
      2};
  const std::int64_t block = sm[0] / 16;
  const int t = static_cast<int>(sm[0] % 16);
  const std::int64_t scale_at =
      l.block_base(block) + l.meta_field_offset(t, 1, turboquant::core::MetaField::kValueScale);
  const fs::path bad = corrupted(c, dir / "bad.npy", [&](std::vector<std::uint8_t>& b) { b[scale_at + 1] ^= 0x10; });
  const Result r = tq("validate " + q(c) + " --cache " + q(bad) + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json j = r.parsed();
  EXPECT_FALSE(j["pass"].get<bool>());
  EXPECT_EQ(j["wrong"].get<int>(), 1);
  ASSERT_EQ(j["wrong_items"].size(), 1u);
  const json& it = j["wrong_items"][0];
  EXPECT_EQ(it["block"].get<std::int64_t>(), block);
  EXPECT_EQ(it["position"].get<int>(), t);
  EXPECT_EQ(it["head"].get<int>(), 1);
  EXPECT_EQ(it["field"].get<std::string>(), "value_scale");
  EXPECT_EQ(it["token"].get<int>(), 0);
  EXPECT_EQ(it["byte"].get<std::int64_t>(), scale_at);
  EXPECT_EQ(j["fields"]["value_scale"]["wrong"].get<int>(), 1);

  // The text names it too, and --max-report limits the list, not the count.
  const Result text = tq("validate " + q(c) + " --cache " + q(bad));
  EXPECT_EQ(text.exit_code, 1);
  const std::string where = "block " + std::to_string(block) + " position " + std::to_string(t) + " head 1 value scale";
  EXPECT_NE(text.out.find(where), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("FAIL  bad.npy: 1 wrong element\n"), std::string::npos) << text.out;

  std::int64_t unused = 0;  // a block no token was stored in (the README: 3 stay unused)
  while (std::any_of(sm.begin(), sm.end(), [&](std::int64_t s) { return s / 16 == unused; })) ++unused;
  const fs::path many = corrupted(c, dir / "many.npy", [&](std::vector<std::uint8_t>& b) {
    for (std::int64_t i = 0; i < 50; ++i) b[l.block_base(unused) + i] = 0x77;
  });
  const Result m = tq("validate " + q(c) + " --cache " + q(many) + " --max-report 2 --json");
  EXPECT_EQ(m.exit_code, 1);
  const json jm = m.parsed();
  EXPECT_EQ(jm["wrong"].get<int>(), 50);
  EXPECT_EQ(jm["fields"]["untouched"]["wrong"].get<int>(), 50);
  ASSERT_EQ(jm["wrong_items"].size(), 2u);
  EXPECT_EQ(jm["wrong_items"][0]["field"].get<std::string>(), "untouched");
  EXPECT_EQ(jm["wrong_items"][0]["within"].get<std::string>(), "key_codes");
  EXPECT_EQ(jm["wrong_items"][0]["block"].get<std::int64_t>(), unused);
}

TEST(ValidateCache, BadInputExits2NamingIt) {
  const fs::path dir = scratch();
  const fs::path c = store_case_path(kStoreCases[0]);  // s01: (26, 16, 2, 134)
  expect_bad_input(tq("validate " + q(c) + " --cache " + q(dir / "nope.npy")), "validate",
                   {"nope.npy", "no such file"});
  std::vector<float> f(26 * 16 * 2 * 134, 0.0f);
  ASSERT_TRUE(turboquant::io::write_npy((dir / "f32.npy").string(), turboquant::io::make_npy({26, 16, 2, 134}, f)).ok());
  expect_bad_input(tq("validate " + q(c) + " --cache " + q(dir / "f32.npy")), "validate",
                   {"f32.npy", "dtype float32, expected uint8"});
  std::vector<std::uint8_t> u(25 * 16 * 2 * 134, 0);
  ASSERT_TRUE(turboquant::io::write_npy((dir / "short.npy").string(), turboquant::io::make_npy({25, 16, 2, 134}, u)).ok());
  expect_bad_input(tq("validate " + q(c) + " --cache " + q(dir / "short.npy")), "validate",
                   {"short.npy", "shape (25, 16, 2, 134), expected (26, 16, 2, 134)"});
  std::vector<std::uint8_t> w(26 * 16 * 2 * 196, 0);
  ASSERT_TRUE(turboquant::io::write_npy((dir / "wide.npy").string(), turboquant::io::make_npy({26, 16, 2, 196}, w)).ok());
  expect_bad_input(tq("validate " + q(c) + " --cache " + q(dir / "wide.npy")), "validate", {"wide.npy", "shape"});

  // A case without keys.npy cannot be re-encoded.
  const fs::path nokeys = dir / "nokeys";
  fs::create_directories(nokeys);
  for (const char* f : {"meta.json", "values.npy", "slot_mapping.npy", "kv_cache.npy"}) fs::copy_file(c / f, nokeys / f);
  expect_bad_input(tq("validate " + q(nokeys) + " --cache kv_cache.npy"), "validate", {"keys.npy"});

  expect_bad_input(tq("validate " + q(c) + " --cache kv_cache.npy --output expected_out.npy"), "validate",
                   {"--output", "--cache"});
  expect_bad_input(tq("validate " + q(c) + " --cache kv_cache.npy --max-report -1"), "validate", {"--max-report"});
  expect_bad_input(tq("validate " + q(c) + " --max-report 3"), "validate", {"--max-report", "--cache"});
}

}  // namespace
