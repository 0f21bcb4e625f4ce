// The golden model on vLLM's multi-token cases (tests/data/vllm-multi, vLLM
// 0.33.0 on an H200): query_start_loc rows, sinks and a sliding window,
// against vLLM's outputs where vLLM has a kernel and always against the
// case's float64 reference (computed with exactly the case's mask, window
// and sinks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/random_problem.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant {
namespace {

struct MultiCase {
  const char* name;
  // Bound on golden vs expected_out: vLLM's own error vs the f64 reference
  // (README) plus ours (1e-6); 0 where the case has no vLLM output.
  double vs_vllm;
};

const MultiCase kCases[] = {
    {"m01_soa_4bit_nc_q1-4-16", 1e-3},        // unified kernel, fp16 tiles: 4.6e-4 from f64
    {"m02_soa_4bit_nc_sinks_q1-4-16", 1e-3},  // the same with sinks: 4.7e-4
    {"m03_aos_k8v4_expanded_q1-3-5", 1e-6},   // AoS decode v1, fp32, expanded rows: 1.9e-7
    {"m04_aos_4bit_nc_window64_q1-8", 0},     // no vLLM window decode: f64 reference only
};

// The decode files, query_start_loc.npy / sinks.npy / sliding_window included.
io::CaseLoadOptions multi_options() {
  io::CaseLoadOptions o = io::CaseLoadOptions::decode();
  o.rows_sinks_window = true;
  return o;
}

class VllmMultiCase : public ::testing::TestWithParam<MultiCase> {};

TEST_P(VllmMultiCase, DecodeMatchesVllmAndFloat64) {
  const MultiCase& mc = GetParam();
  io::CaseDir c;
  const Status load = io::load_case(std::string(TQ_TEST_DATA_DIR) + "/vllm-multi/" + mc.name,
                                    multi_options(), &c);
  ASSERT_TRUE(load.ok()) << load.to_string();
  ASSERT_TRUE(c.query_start_loc.present);
  ASSERT_TRUE(c.reference_out_f64.present);
  EXPECT_EQ(c.sinks.present, std::string(mc.name).find("sinks") != std::string::npos);
  EXPECT_EQ(c.sliding_window != 0, std::string(mc.name).find("window") != std::string::npos);
  std::vector<float> out, lse;
  const DecodeArgs a = io::case_decode_args(c, nullptr, 32, &out, &lse);
  const Status s = decode_reference(io::case_cache(c), a);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const double vs_f64 = testing::rel_l2(out, c.reference_out_f64.values);
  EXPECT_LE(vs_f64, 1e-6);
  double vs_vllm = -1, lse_max_abs = -1;
  EXPECT_EQ(c.expected_out.present, mc.vs_vllm > 0);
  if (c.expected_out.present) {
    vs_vllm = testing::rel_l2(out, c.expected_out.values);
    EXPECT_LE(vs_vllm, mc.vs_vllm);
  }
  if (c.expected_lse.present) {
    lse_max_abs = 0;
    for (std::size_t i = 0; i < lse.size(); ++i) {
      lse_max_abs = std::max(lse_max_abs, std::fabs(double(lse[i]) - double(c.expected_lse.values[i])));
    }
    EXPECT_LE(lse_max_abs, 1e-5);
  }
  std::printf("[ numbers  ] %s: T %lld, rel L2 vs f64 %.3g, vs vLLM %.3g, LSE max abs vs vLLM %.3g\n", mc.name,
              static_cast<long long>(c.num_query_rows), vs_f64, vs_vllm, lse_max_abs);
  RecordProperty("rel_l2_vs_f64", std::to_string(vs_f64));
}

INSTANTIATE_TEST_SUITE_P(Cases, VllmMultiCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<MultiCase>& info) {
                           return std::string(info.param.name).substr(0, 3);
                         });

// The window matters on m04 (vLLM's AoS decode, which takes no window, is 0.88
// from its reference): decoding without it must not pass.
TEST(VllmMultiCase, WindowIsApplied) {
  io::CaseDir c;
  ASSERT_TRUE(io::load_case(std::string(TQ_TEST_DATA_DIR) + "/vllm-multi/m04_aos_4bit_nc_window64_q1-8",
                            multi_options(), &c)
                  .ok());
  std::vector<float> out, lse;
  DecodeArgs a = io::case_decode_args(c, nullptr, 32, &out, &lse);
  a.sliding_window = 0;
  ASSERT_TRUE(decode_reference(io::case_cache(c), a).ok());
  EXPECT_GT(testing::rel_l2(out, c.reference_out_f64.values), 0.1);
}

}  // namespace
}  // namespace turboquant
