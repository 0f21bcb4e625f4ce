// The tq binary itself (issue 3), run as a user would: on the five real vLLM
// cases, against facts §b and vllm-codebooks.json, and on broken copies of a
// case (made here, in the build tree) that must exit 2 with a one-line message
// naming the problem, never crash.
#include <cmath>

#include "tq_runner.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;

class Case : public ::testing::TestWithParam<const char*> {};

TEST_P(Case, ValidatePassesOnExpectedOut) {
  const Result r = tq("validate " + q(kCases / GetParam()));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  const json j = tq("validate " + q(kCases / GetParam()) + " --json").parsed();
  EXPECT_TRUE(j["pass"].get<bool>());
  EXPECT_LE(j["vs_golden"]["rel_l2"].get<double>(), 1e-5);
  EXPECT_LE(j["golden_vs_f64_dequant"]["rel_l2"].get<double>(), 1e-5);
  // The format's own error on these cases is 0.1 to 0.33 (the README's numbers).
  EXPECT_GT(j["f64_dequant_vs_f64_original"]["rel_l2"].get<double>(), 0.05);
  EXPECT_LT(j["f64_dequant_vs_f64_original"]["rel_l2"].get<double>(), 0.4);
}

TEST_P(Case, ValidateFlagsVllmV2Exactly) {
  const bool good = std::string(GetParam()).rfind("s04", 0) == 0;  // 3-bit values: v2 is right
  const Result r = tq("validate " + q(kCases / GetParam()) + " --output vllm_v2_out.npy");
  EXPECT_EQ(r.exit_code, good ? 0 : 1) << r.out << r.err;
  EXPECT_NE(r.out.find(good ? "PASS" : "FAIL"), std::string::npos) << r.out;
  const Result rj = tq("validate " + q(kCases / GetParam()) + " --output vllm_v2_out.npy --json");
  EXPECT_EQ(rj.exit_code, good ? 0 : 1);
  const json j = rj.parsed();
  EXPECT_EQ(j["pass"].get<bool>(), good);
  if (!good) {
    EXPECT_GT(j["vs_golden"]["rel_l2"].get<double>(), 0.5);
  }
}

TEST_P(Case, EncodeAgreesWithVllmStore) {
  const fs::path dir = scratch();
  const Result r = tq("encode " + q(kCases / GetParam()) + " --out " + q(dir / "cache.npy") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = r.parsed();
  EXPECT_GE(j["byte_agreement"].get<double>(), 0.999);
  turboquant::io::NpyArray ours, theirs;
  ASSERT_TRUE(turboquant::io::read_npy((dir / "cache.npy").string(), &ours).ok());
  ASSERT_TRUE(turboquant::io::read_npy((kCases / GetParam() / "kv_cache.npy").string(), &theirs).ok());
  ASSERT_EQ(ours.shape, theirs.shape);
  ASSERT_EQ(ours.dtype, turboquant::io::NpyDType::kUInt8);
  std::size_t same = 0;
  for (std::size_t i = 0; i < ours.data.size(); ++i) same += ours.data[i] == theirs.data[i];
  EXPECT_GE(double(same) / ours.data.size(), 0.999);
  EXPECT_EQ(j["bytes_equal"].get<std::size_t>(), same);
}

TEST_P(Case, DecodeWritesTheGoldenOutput) {
  const fs::path dir = scratch();
  const Result r = tq("decode " + q(kCases / GetParam()) + " --out " + q(dir / "out.npy") + " --lse " +
                      q(dir / "lse.npy") + " --backend cpu-ref");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Validating our own output passes with (close to) zero error.
  const json j = tq("validate " + q(kCases / GetParam()) + " --output " + q(dir / "out.npy") + " --json").parsed();
  EXPECT_EQ(j["vs_golden"]["rel_l2"].get<double>(), 0.0);
  turboquant::io::NpyArray lse;
  ASSERT_TRUE(turboquant::io::read_npy((dir / "lse.npy").string(), &lse).ok());
  EXPECT_EQ(lse.ndim(), 2);
}

TEST_P(Case, InspectFindsACleanCache) {
  const Result r = tq("inspect " + q(kCases / GetParam()) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = r.parsed();
  EXPECT_EQ(j["non_finite_metadata"].get<int>(), 0);
  EXPECT_EQ(j["nonzero_bytes_outside_referenced_slots"].get<int>(), 0);
  EXPECT_GT(j["blocks_referenced"].get<int>(), 0);
  EXPECT_EQ(tq("inspect " + q(kCases / GetParam())).exit_code, 0);
}

// Every CPU path (each ISA tq isas lists) reproduces the golden model's bits.
TEST_P(Case, CpuBackendMatchesGoldenOnEveryIsa) {
  const fs::path dir = scratch();
  const Result isas = tq("isas");
  ASSERT_EQ(isas.exit_code, 0);
  std::istringstream lines(isas.out);
  for (std::string isa; std::getline(lines, isa);) {
    SCOPED_TRACE(isa);
    const fs::path out = dir / ("out_" + isa + ".npy");
    const Result r =
        tq("decode " + q(kCases / GetParam()) + " --backend cpu --isa " + isa + " --threads 2 --out " + q(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = tq("validate " + q(kCases / GetParam()) + " --output " + q(out) + " --json").parsed();
    EXPECT_EQ(j["vs_golden"]["rel_l2"].get<double>(), 0.0);
  }
}

// The backends `tq backends --json` lists.
json listed_backends() {
  const Result r = tq("backends --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.parsed();
}

// Every backend that runs here decodes and encodes through tq like the golden
// model: the same bits (the same rel_l2 vs golden: 0), or within cuda:fast's
// 1e-3 when the backend says its decode is not exact.
TEST_P(Case, EveryAvailableBackendReproducesTheGoldenModel) {
  const fs::path dir = scratch();
  const std::string c = q(kCases / GetParam());
  ASSERT_EQ(tq("encode " + c + " --backend cpu-ref --out " + q(dir / "golden_cache.npy")).exit_code, 0);
  const std::string golden_cache = slurp(dir / "golden_cache.npy");
  int ran = 0;
  for (const json& b : listed_backends()) {
    if (!b["available"].get<bool>()) continue;
    const std::string name = b["name"];
    SCOPED_TRACE(name);
    std::string file = name;
    for (char& ch : file) ch = ch == ':' ? '_' : ch;
    const fs::path out = dir / ("out_" + file + ".npy"), cache = dir / ("cache_" + file + ".npy");
    const Result d = tq("decode " + c + " --backend " + name + " --threads 2 --out " + q(out) + " --json");
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.parsed()["backend"], name);
    const json v = tq("validate " + c + " --output " + q(out) + " --json").parsed();
    if (b["exact_decode"].get<bool>()) {
      EXPECT_EQ(v["vs_golden"]["rel_l2"].get<double>(), 0.0);
    } else {
      EXPECT_LE(v["vs_golden"]["rel_l2"].get<double>(), 1e-3);
    }
    const Result e = tq("encode " + c + " --backend " + name + " --out " + q(cache));
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_TRUE(slurp(cache) == golden_cache) << "encode bytes differ from cpu-ref's";
    ++ran;
  }
  EXPECT_GE(ran, 2);  // cpu-ref and cpu:scalar run everywhere
}

INSTANTIATE_TEST_SUITE_P(Vllm, Case, ::testing::ValuesIn(kCaseNames));

TEST(Backends, ListsEveryBackendOfTheBuildWithAReason) {
  const json all = listed_backends();
  ASSERT_TRUE(all.is_array());
  std::vector<std::string> names;
  const Result isas = tq("isas");
  for (const json& b : all) {
    const std::string name = b["name"];
    SCOPED_TRACE(name);
    names.push_back(name);
    ASSERT_TRUE(b["available"].is_boolean());
    ASSERT_TRUE(b["reason"].is_string());
    ASSERT_TRUE(b["exact_decode"].is_boolean());
    EXPECT_FALSE(b["description"].get<std::string>().empty());
    const bool available = b["available"].get<bool>();
    // An unavailable backend says why; an available one has nothing to say.
    EXPECT_EQ(b["reason"].get<std::string>().empty(), available);
    if (name.rfind("cpu:", 0) == 0) {
      EXPECT_EQ(available, isas.out.find(name.substr(4) + "\n") != std::string::npos) << isas.out;
    }
#ifndef TQ_TEST_TQ_HAS_CUDA
    if (name.rfind("cuda:", 0) == 0) {
      EXPECT_FALSE(available);
      EXPECT_EQ(b["reason"].get<std::string>().rfind("not built with CUDA", 0), 0u) << b["reason"];
    }
#endif
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cpu-ref", "cpu:scalar", "cpu:avx2", "cpu:avx512", "cuda:strict",
                                             "cuda:fast"}));
  EXPECT_TRUE(all[0]["available"].get<bool>());
  EXPECT_TRUE(all[1]["available"].get<bool>());

  // The text form: one line per backend, "<name> yes|no <description or reason>".
  const Result text = tq("backends");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::istringstream lines(text.out);
  std::size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    ASSERT_LT(i, all.size()) << line;
    const bool available = all[i]["available"].get<bool>();
    EXPECT_EQ(line.rfind(all[i]["name"].get<std::string>() + " ", 0), 0u) << line;
    EXPECT_NE(line.find(available ? " yes " : " no "), std::string::npos) << line;
    EXPECT_NE(line.find((available ? all[i]["description"] : all[i]["reason"]).get<std::string>()), std::string::npos)
        << line;
  }
  EXPECT_EQ(i, all.size());
}

// Asking for a backend that cannot run here: exit 3 and its reason; an unknown
// name: exit 2, naming what exists.
TEST(Backends, UnavailableOnesExitThreeWithTheirReason) {
  const fs::path dir = scratch();
  const std::string c = q(kCases / kCaseNames[0]) + " --out " + q(dir / "out.npy");
  for (const json& b : listed_backends()) {
    if (b["available"].get<bool>()) continue;
    const std::string name = b["name"];
    const Result r = tq("decode " + c + " --backend " + name);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(r.err, "tq decode: backend " + name + ": " + b["reason"].get<std::string>() + "\n");
  }
  const Result unknown = tq("decode " + c + " --backend cpu:avx9000");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  for (const char* name : {"--backend", "cpu:avx9000", "cpu-ref", "cuda-strict", "cpu:scalar", "cuda:fast"}) {
    EXPECT_NE(unknown.err.find(name), std::string::npos) << unknown.err;
  }
}

// facts §b: sizes per token-head, and the D=128, bs=16, Hk=8 blocks measured on an H200.
TEST(Info, PrintsTheNumbersOfFactsB) {
  struct Row {
    const char* preset;
    int slot[3];  // D = 64, 128, 256
    int kdb128, vdb128, nf, meta, block;
    double compression;
  };
  const Row rows[] = {{"turboquant_k8v4", {100, 196, 388}, 128, 64, 2, 24576, 25088, 2.61},
                      {"4bit_nc", {70, 134, 262}, 64, 64, 3, 16384, 17152, 3.82},
                      {"turboquant_k3v4_nc", {62, 118, 230}, 48, 64, 3, 14336, 15104, 4.34},
                      {"3bit_nc", {54, 102, 198}, 48, 48, 3, 12288, 13056, 5.02}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.preset);
    const int dims[] = {64, 128, 256};
    for (int i = 0; i < 3; ++i) {
      const Result r = tq(std::string("info --preset ") + row.preset + " --head-dim " + std::to_string(dims[i]) +
                          " --block-size 16 --kv-heads 8 --json");
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const json j = r.parsed();
      EXPECT_EQ(j["slot_bytes"].get<int>(), row.slot[i]);
      EXPECT_EQ(j["bytes_per_token_head"].get<int>(), row.slot[i]);
      if (dims[i] != 128) continue;
      EXPECT_EQ(j["key_data_bytes"].get<int>(), row.kdb128);
      EXPECT_EQ(j["value_data_bytes"].get<int>(), row.vdb128);
      EXPECT_EQ(j["meta_fields"].get<int>(), row.nf);
      EXPECT_EQ(j["meta_offset"].get<int>(), row.meta);
      EXPECT_EQ(j["block_bytes"].get<int>(), row.block);
      EXPECT_NEAR(j["compression_vs_bf16"].get<double>(), row.compression, 0.005);
    }
  }
  // docs/FORMAT.md §6, in the human output.
  const Result r = tq("info --preset 4bit_nc --head-dim 128 --block-size 16 --kv-heads 8 --slot 5 --head 2 --block 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s :
       {"134", "16384", "17152", "768", "3.82x", "[5376, 5440)", "[5440, 5504)", "16586", "16618", "16650", "51456"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST(Codebook, MatchesVllmCodebooksJson) {
  std::ifstream f(fs::path(TQ_TEST_DATA_DIR) / "vllm-codebooks.json");
  const json ref = json::parse(f);
  int checked = 0;
  for (const auto& [key, book] : ref["codebooks"].items()) {
    SCOPED_TRACE(key);
    const int d = std::stoi(key.substr(1, key.find('_') - 1)), b = std::stoi(key.substr(key.find("_b") + 2));
    const Result r = tq("codebook --bits " + std::to_string(b) + " --head-dim " + std::to_string(d) + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = r.parsed();
    for (const char* field : {"centroids_hex", "midpoints_hex"}) EXPECT_EQ(j[field], book[field]) << field;
    for (const char* field : {"centroids", "midpoints"}) {
      ASSERT_EQ(j[field].size(), book[field].size());
      for (std::size_t i = 0; i < j[field].size(); ++i) {
        EXPECT_EQ(static_cast<float>(j[field][i].get<double>()), static_cast<float>(book[field][i].get<double>()));
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 9);
  // The human table shows the same bit patterns.
  const std::string table = tq("codebook --bits 4 --head-dim 128").out;
  for (const auto& hex : ref["codebooks"]["d128_b4"]["centroids_hex"]) {
    EXPECT_NE(table.find(hex.get<std::string>()), std::string::npos) << hex;
  }
}

}  // namespace
