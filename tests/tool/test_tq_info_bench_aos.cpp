// tq info --layout / --fp8-format and tq bench --layout (issue 12): the AoS
// slot map against vLLM's key_packed_size and docs/FORMAT.md's worked
// example, both layouts timed on the same data, and bad names.
#include "tq_runner.hpp"

namespace {

using namespace tq_test;

// The example of block_layout.hpp / docs/FORMAT.md: 4bit_nc, D 128, block 16,
// 8 KV heads; slot (t 3, h 5) starts at (3 * 8 + 5) * 134 = 3886.
TEST(InfoAos, PrintsTheSlotMapOfTheWorkedExample) {
  const std::string args = "info --preset 4bit_nc --head-dim 128 --block-size 16 --kv-heads 8 --layout aos";
  const Result r = tq(args + " --slot 3 --head 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = r.parsed();
  EXPECT_EQ(j["layout"], "aos");
  EXPECT_EQ(j["key_norm_stored"], "raw");
  EXPECT_EQ(j["block_bytes"].get<int>(), 17152);  // the same block as SoA's
  EXPECT_EQ(j["slot_stride"].get<int>(), 134);
  EXPECT_FALSE(j.contains("meta_offset"));  // AoS has no metadata region
  const json want = json::parse(R"([
    {"field": "key_codes", "begin": 0, "end": 64}, {"field": "key_norm", "begin": 64, "end": 66},
    {"field": "value_codes", "begin": 66, "end": 130}, {"field": "value_scale", "begin": 130, "end": 132},
    {"field": "value_zero", "begin": 132, "end": 134}])");
  EXPECT_EQ(j["slot_map"], want) << j["slot_map"].dump();
  const json& rec = j["record"];
  EXPECT_EQ(rec["key_bytes"], json::parse("[3886, 3950]"));
  EXPECT_EQ(rec["key_norm_offset"].get<int>(), 3950);
  EXPECT_EQ(rec["value_bytes"], json::parse("[3952, 4016]"));
  EXPECT_EQ(rec["value_scale_offset"].get<int>(), 4016);
  EXPECT_EQ(rec["value_zero_offset"].get<int>(), 4018);

  const Result text = tq(args + " --slot 3 --head 5");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* s : {"aos: [block_size][kv_heads][slot]", "(t * 8 + h) * 134", "key norm (fp16)      [64, 66)",
                        "value zero (fp16)    [132, 134)", "applied at decode", "[3886, 3950)", "4018"}) {
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
  }
  EXPECT_EQ(text.out.find("meta offset"), std::string::npos) << text.out;
}

// Every preset and head_dim: the slot fields tile the slot in vLLM's order,
// value codes start at key_packed_size = ceil(D * bits / 8) + 2 (D for FP8
// keys), and the sizes are SoA's.
TEST(InfoAos, SlotMapTilesTheSlotForEveryPreset) {
  const struct {
    const char* preset;
    int key_bits;
  } kPresets[] = {{"k8v4", 8}, {"4bit_nc", 4}, {"k3v4_nc", 3}, {"3bit_nc", 3}};
  for (const auto& p : kPresets) {
    for (int d : {64, 128, 256}) {
      SCOPED_TRACE(std::string(p.preset) + " D " + std::to_string(d));
      const std::string args = std::string("info --preset ") + p.preset + " --head-dim " + std::to_string(d) +
                               " --block-size 32 --kv-heads 4 --json";
      const json soa = tq(args).parsed(), aos = tq(args + " --layout aos").parsed();
      EXPECT_EQ(soa["layout"], "soa");
      for (const char* k : {"slot_bytes", "slot_bytes_aligned", "block_bytes", "padding_bytes"}) {
        EXPECT_EQ(soa[k], aos[k]) << k;
      }
      const json& map = aos["slot_map"];
      ASSERT_EQ(map.size(), p.key_bits == 8 ? 4u : 5u);
      std::int64_t at = 0;
      for (const json& f : map) {
        EXPECT_EQ(f["begin"].get<std::int64_t>(), at) << f.dump();
        at = f["end"].get<std::int64_t>();
      }
      EXPECT_EQ(at, aos["slot_bytes"].get<std::int64_t>());
      const int key_packed = p.key_bits == 8 ? d : (d * p.key_bits + 7) / 8 + 2;
      EXPECT_EQ(map[p.key_bits == 8 ? 1 : 2]["field"], "value_codes");
      EXPECT_EQ(map[p.key_bits == 8 ? 1 : 2]["begin"].get<int>(), key_packed);
      EXPECT_EQ(aos["key_norm_stored"], p.key_bits == 8 ? "none" : "raw");
      EXPECT_EQ(soa["key_norm_stored"], p.key_bits == 8 ? "none" : "corrected");
    }
  }
}

TEST(InfoAos, NamesTheFp8Flavour) {
  const json e4m3 = tq("info --preset k8v4 --head-dim 128 --layout aos --json").parsed();
  EXPECT_EQ(e4m3["fp8_format"], "e4m3");
  const json e4b15 = tq("info --preset k8v4 --head-dim 128 --layout aos --fp8-format e4b15 --json").parsed();
  EXPECT_EQ(e4b15["fp8_format"], "e4b15");
  EXPECT_EQ(e4b15["slot_map"], e4m3["slot_map"]);  // the flavour changes no address
  const Result text = tq("info --preset k8v4 --head-dim 128 --fp8-format e4b15");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("FP8 e4b15: exponent bias 15, |k| <= 1.75"), std::string::npos) << text.out;
  EXPECT_FALSE(tq("info --preset 4bit_nc --head-dim 128 --json").parsed().contains("fp8_format"));
}

TEST(InfoAos, BadLayoutAndFlavourNamesAreErrors) {
  const std::string info = "info --preset 4bit_nc --head-dim 128";
  for (const char* bad : {"AoS", "both", "aos,soa", "sao"}) {
    expect_bad_input(tq(info + " --layout " + bad), "info", {"--layout", std::string("\"") + bad + "\"", "soa or aos"});
  }
  expect_bad_input(tq(info + " --layout ''"), "info", {"--layout", "\"\""});
  expect_bad_input(tq("info --preset k8v4 --head-dim 128 --fp8-format e5m2"), "info",
                   {"--fp8-format", "\"e5m2\"", "e4m3 or e4b15"});
  expect_bad_input(tq(info + " --fp8-format e4b15"), "info",
                   {"--fp8-format", "e4b15", "FP8 keys", "turboquant_4bit_nc"});
  EXPECT_EQ(tq(info + " --fp8-format e4m3").exit_code, 0);  // the default, meaningless but harmless
}

const std::string kSmallBench =
    "bench --batch 2 --seq-len 100 --q-heads 4 --kv-heads 2 --head-dim 64 --repeats 2 --backend cpu-ref";

// Both layouts on the same data: one row per preset and layout, SoA first;
// the same format error (the bytes differ only in where the fields sit and
// which side of the fp16 rounding the norm correction is on).
TEST(BenchAos, TimesBothLayoutsOnTheSameData) {
  const Result r = tq(kSmallBench + " --preset 4bit_nc,k8v4 --layout soa,aos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = r.parsed()["results"];
  ASSERT_EQ(res.size(), 4u);
  const char* presets[] = {"turboquant_4bit_nc", "turboquant_4bit_nc", "turboquant_k8v4", "turboquant_k8v4"};
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(res[i]["preset"], presets[i]);
    EXPECT_EQ(res[i]["layout"], i % 2 ? "aos" : "soa");
    EXPECT_LT(res[i]["rel_l2_vs_f64_dequant"].get<double>(), 1e-5);
  }
  for (std::size_t i : {0u, 2u}) {
    const double soa = res[i]["rel_l2_vs_f64_original"], aos = res[i + 1]["rel_l2_vs_f64_original"];
    EXPECT_NEAR(aos, soa, 1e-3 * soa);
  }
  const Result text = tq(kSmallBench + " --preset 3bit_nc --layout aos");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("layout"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("3bit_nc   aos       "), std::string::npos) << text.out;
  // The default stays SoA.
  const json dflt = tq(kSmallBench + " --preset 4bit_nc --json").parsed();
  EXPECT_EQ(dflt["results"][0]["layout"], "soa");
}

// e4b15 clips |k| > 1.75, which N(0, 1) keys often exceed: a larger format error.
TEST(BenchAos, Fp8FlavourChangesTheKeysOfK8v4) {
  const json e4m3 = tq(kSmallBench + " --preset k8v4 --layout aos --json").parsed()["results"][0];
  const json e4b15 = tq(kSmallBench + " --preset k8v4 --layout aos --fp8-format e4b15 --json").parsed()["results"][0];
  EXPECT_EQ(e4m3["fp8_format"], "e4m3");
  EXPECT_EQ(e4b15["fp8_format"], "e4b15");
  EXPECT_LT(e4b15["rel_l2_vs_f64_dequant"].get<double>(), 1e-5);
  EXPECT_GT(e4b15["rel_l2_vs_f64_original"].get<double>(), 1.2 * e4m3["rel_l2_vs_f64_original"].get<double>());
}

TEST(BenchAos, BadLayoutNamesAreErrors) {
  expect_bad_input(tq("bench --layout sao"), "bench", {"--layout", "\"sao\"", "soa or aos"});
  expect_bad_input(tq("bench --layout soa,AOS"), "bench", {"--layout", "\"AOS\""});
  expect_bad_input(tq("bench --layout ''"), "bench", {"--layout", "names no layout"});
  expect_bad_input(tq("bench --fp8-format e5m2"), "bench", {"--fp8-format", "\"e5m2\""});
}

TEST(HelpAos, CommandsSayTheyTakeBothLayouts) {
  const Result info = tq("info --help"), bench = tq("bench --help"), top = tq("--help");
  for (const char* s : {"--layout", "aos", "--fp8-format", "e4b15"}) {
    EXPECT_NE(info.out.find(s), std::string::npos) << s << "\n" << info.out;
    EXPECT_NE(bench.out.find(s), std::string::npos) << s << "\n" << bench.out;
  }
  EXPECT_NE(top.out.find("SoA and AoS"), std::string::npos) << top.out;
}

}  // namespace
