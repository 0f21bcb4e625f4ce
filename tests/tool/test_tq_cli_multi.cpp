// tq validate / decode / bench on multi-token rows, sinks and sliding windows
// (issue 13; tests/data/vllm-multi): vLLM's outputs pass, tq decode writes T
// rows equal to the golden model, a perturbed row fails naming that row, and
// bad multi-token input exits 2 naming the option.
#include "tq_runner.hpp"
#include "turboquant/io/case_dir.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;

const fs::path kMulti = fs::path(TQ_TEST_DATA_DIR) / "vllm-multi";
const char* const kWithExpected[] = {"m01_soa_4bit_nc_q1-4-16", "m02_soa_4bit_nc_sinks_q1-4-16",
                                     "m03_aos_k8v4_expanded_q1-3-5"};
const char* const kM04 = "m04_aos_4bit_nc_window64_q1-8";

TEST(TqMulti, ValidatePassesOnVllmsMultiTokenOutputs) {
  for (const char* name : kWithExpected) {
    SCOPED_TRACE(name);
    const Result r = tq("validate " + q(kMulti / name));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS  expected_out.npy"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" query rows (q_len "), std::string::npos) << r.out;
    const Result rj = tq("validate " + q(kMulti / name) + " --json");
    ASSERT_EQ(rj.exit_code, 0) << rj.err;
    const json j = rj.parsed();
    EXPECT_TRUE(j["pass"].get<bool>());
    EXPECT_LT(j["vs_golden"]["rel_l2"].get<double>(), 1e-3);
    EXPECT_LT(j["f64_dequant_vs_reference_out_f64"]["rel_l2"].get<double>(), 1e-6);
    EXPECT_TRUE(j["vs_golden"]["worst_head"].contains("row"));
    EXPECT_EQ(j["query_start_loc"].size(), 4u);
    EXPECT_FALSE(j["f64_original_available"].get<bool>());
  }
}

TEST(TqMulti, DecodeWritesTRowsEqualToTheGoldenModel) {
  const fs::path dir = scratch();
  const std::pair<const char*, std::int64_t> cases[] = {{kWithExpected[1], 21}, {kWithExpected[2], 9}, {kM04, 9}};
  for (const auto& [name, T] : cases) {
    SCOPED_TRACE(name);
    const fs::path out = dir / (std::string(name) + ".npy"), lse = dir / (std::string(name) + "_lse.npy");
    const Result d = tq("decode " + q(kMulti / name) + " --out " + q(out) + " --lse " + q(lse));
    ASSERT_EQ(d.exit_code, 0) << d.err;
    turboquant::io::CaseArray<float> got, got_lse;
    ASSERT_TRUE(turboquant::io::load_float_array(out.string(), &got).ok());
    ASSERT_TRUE(turboquant::io::load_float_array(lse.string(), &got_lse).ok());
    EXPECT_EQ(got.shape, (std::vector<std::int64_t>{T, 8, 128}));
    EXPECT_EQ(got_lse.shape, (std::vector<std::int64_t>{T, 8}));
    const json j = tq("validate " + q(kMulti / name) + " --output " + q(out) + " --json").parsed();
    EXPECT_TRUE(j["pass"].get<bool>());
    EXPECT_EQ(j["vs_golden"]["max_abs"].get<double>(), 0.0);  // the golden model's own bytes
    EXPECT_LT(j["f64_dequant_vs_reference_out_f64"]["rel_l2"].get<double>(), 1e-6);
  }
}

TEST(TqMulti, APerturbedRowFailsNamingThatRow) {
  // m01: query_start_loc 0, 1, 5, 21: row 12 belongs to sequence 2.
  turboquant::io::CaseArray<float> out;
  ASSERT_TRUE(turboquant::io::load_float_array((kMulti / kWithExpected[0] / "expected_out.npy").string(), &out).ok());
  out.values[(12 * 8 + 6) * 128 + 40] += 1.0f;
  const fs::path file = scratch() / "perturbed.npy";
  ASSERT_TRUE(turboquant::io::write_npy(file.string(), turboquant::io::make_npy<float>(out.shape, out.values)).ok());
  const Result r = tq("validate " + q(kMulti / kWithExpected[0]) + " --output " + q(file));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL  perturbed.npy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("worst head: sequence 2 row 12, head 6"), std::string::npos) << r.out;
  const json j = tq("validate " + q(kMulti / kWithExpected[0]) + " --output " + q(file) + " --json").parsed();
  EXPECT_FALSE(j["pass"].get<bool>());
  EXPECT_EQ(j["vs_golden"]["worst_head"]["row"].get<int>(), 12);
  EXPECT_EQ(j["vs_golden"]["worst_head"]["sequence"].get<int>(), 2);
  EXPECT_EQ(j["vs_golden"]["max_abs_at"]["dim"].get<int>(), 40);
}

TEST(TqMulti, BadMultiTokenInput) {
  // m04 has no vLLM output: validate needs --output.
  expect_bad_input(tq("validate " + q(kMulti / kM04)), "validate", {"--output", "no expected_out.npy"});
  // An output of one row per sequence is not [T, Hq, D].
  const fs::path file = scratch() / "short.npy";
  const std::vector<float> zeros(static_cast<std::size_t>(3) * 8 * 128);
  ASSERT_TRUE(turboquant::io::write_npy(file.string(), turboquant::io::make_npy<float>({3, 8, 128}, zeros)).ok());
  const Result r = tq("validate " + q(kMulti / kWithExpected[0]) + " --output " + q(file));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("short.npy"), std::string::npos) << r.err;
  const std::string bench = "bench --batch 2 --seq-len 100 --q-heads 4 --kv-heads 2 --head-dim 64 --repeats 1";
  expect_bad_input(tq(bench + " --q-len 129"), "bench", {"--q-len", "129", "[1, 128]"});
  expect_bad_input(tq(bench + " --q-len 0"), "bench", {"--q-len", "0"});
  expect_bad_input(tq(bench + " --q-len 101"), "bench", {"--q-len", "101", "--seq-len 100"});
  expect_bad_input(tq(bench + " --window -1"), "bench", {"--window", "-1"});
}

TEST(TqMulti, BenchTimesRowsSinksAndWindows) {
  const std::string bench =
      "bench --batch 2 --seq-len 100 --q-heads 4 --kv-heads 2 --head-dim 64 --repeats 1 --preset 4bit_nc,k8v4";
  const Result r = tq(bench + " --backend cpu-ref --q-len 4 --sinks --window 30 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json res = r.parsed()["results"];
  ASSERT_EQ(res.size(), 2u);
  for (const json& row : res) {
    EXPECT_EQ(row["q_len"].get<int>(), 4);
    EXPECT_TRUE(row["sinks"].get<bool>());
    EXPECT_EQ(row["window"].get<int>(), 30);
    EXPECT_LT(row["rel_l2_vs_f64_dequant"].get<double>(), 1e-5);
  }
  // Fewer rows, no sinks and no window read the full cache again: another attention.
  const json plain = tq(bench + " --backend cpu-ref --json").parsed()["results"];
  EXPECT_NE(plain[0]["rel_l2_vs_f64_original"].get<double>(), res[0]["rel_l2_vs_f64_original"].get<double>());
  const Result text = tq(bench + " --q-len 4 --sinks --window 30");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("4 query rows per sequence; sinks; sliding window 30"), std::string::npos) << text.out;
#ifdef TQ_TEST_TQ_HAS_CUDA
  // A CUDA backend that implements one token per sequence answers kUnsupported:
  // a row saying so, not an exit; one that implements them matches the oracle.
  for (const char* backend : {"cuda:strict", "cuda:fast"}) {
    const Result c = tq(bench + " --backend " + backend + " --q-len 4 --sinks --json");
    if (c.exit_code == 3) continue;  // no GPU here
    ASSERT_EQ(c.exit_code, 0) << c.err;
    for (const json& row : c.parsed()["results"]) {
      if (row.contains("unsupported")) {
        EXPECT_NE(row["unsupported"].get<std::string>().find("query_start_loc"), std::string::npos) << row;
      } else {
        EXPECT_LT(row["rel_l2_vs_f64_dequant"].get<double>(), 1e-3) << row;
      }
    }
    EXPECT_EQ(tq(bench + " --backend " + backend + " --window 30").exit_code, 0);
  }
#endif
}

}  // namespace
