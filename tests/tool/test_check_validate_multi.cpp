// validate_output on vLLM's multi-token cases (tests/data/vllm-multi): query
// rows, sinks and a sliding window reach the golden decode and the float64
// oracle row by row. vLLM's fp16 unified kernel (m01, m02) passes at ~4.6e-4,
// the oracle agrees with the case's own reference_out_f64, a perturbed row
// fails at that row, and the output must hold T rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "turboquant/check/case_inputs.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant::checks {
namespace {

namespace fs = std::filesystem;

struct MultiCase {
  const char* name;
  double max_vs_golden;     // the case's expected_out vs golden (0: the case has none)
  double max_vs_reference;  // our f64 oracle vs reference_out_f64
};

const MultiCase kMultiCases[] = {{"m01_soa_4bit_nc_q1-4-16", 1e-3, 1e-6},
                                 {"m02_soa_4bit_nc_sinks_q1-4-16", 1e-3, 1e-6},
                                 {"m03_aos_k8v4_expanded_q1-3-5", 1e-6, 1e-12},
                                 {"m04_aos_4bit_nc_window64_q1-8", 0, 1e-6}};

io::CaseDir load_multi(const std::string& name) {
  io::CaseLoadOptions load = io::CaseLoadOptions::decode();
  load.rows_sinks_window = true;
  io::CaseDir c;
  const Status s = io::load_case((fs::path(TQ_TEST_DATA_DIR) / "vllm-multi" / name).string(), load, &c);
  EXPECT_TRUE(s.ok()) << s.message();
  return c;
}

// The case's Lloyd-Max codebook in *cb, or null for FP8 keys (as tq does).
const Codebook* case_codebook(const io::CaseDir& c, Codebook* cb) {
  if (c.format.fp8_keys()) return nullptr;
  const Status s = make_codebook(c.format.key_bits, c.centroids.values, cb);
  EXPECT_TRUE(s.ok()) << s.message();
  return cb;
}

// The golden model's own output [T, Hq, D].
std::vector<float> golden(const io::CaseDir& c, const Codebook* codebook) {
  std::vector<float> out;
  const DecodeArgs a = io::case_decode_args(c, codebook, c.num_kv_splits, &out, nullptr);
  const Status s = decode_reference(io::case_cache(c), a);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

class MultiValidate : public ::testing::TestWithParam<MultiCase> {};

TEST_P(MultiValidate, ExpectedOutAndGoldenPassAndTheOracleMatchesTheReference) {
  const io::CaseDir c = load_multi(GetParam().name);
  ASSERT_TRUE(c.query_start_loc.present);
  Codebook storage;
  const Codebook* codebook = case_codebook(c, &storage);
  const std::vector<float> gold = golden(c, codebook);
  const bool has_expected = GetParam().max_vs_golden > 0;
  ASSERT_EQ(c.expected_out.present, has_expected);
  const std::vector<float>& output = has_expected ? c.expected_out.values : gold;
  ValidationInputs in = case_validation_inputs(c, codebook, output, "out");
  in.threads = 2;
  ValidationReport r;
  const Status s = validate_output(in, &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(r.pass) << render_report(r);
  EXPECT_TRUE(r.multi_row);
  EXPECT_FALSE(r.format_error_measured);  // no keys.npy in tests/data
  EXPECT_LE(r.vs_golden().rel_l2, has_expected ? GetParam().max_vs_golden : 0.0);
  ASSERT_NE(r.row(kF64DequantVsReference), nullptr);
  EXPECT_LT(r.row(kF64DequantVsReference)->cmp.rel_l2, GetParam().max_vs_reference);
  EXPECT_LT(r.row(kGoldenVsF64Dequant)->cmp.rel_l2, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(VllmMulti, MultiValidate, ::testing::ValuesIn(kMultiCases),
                         [](const auto& info) { return std::string(info.param.name).substr(0, 3); });

TEST(MultiValidateRows, APerturbedRowFailsAtThatRow) {
  // m02: query_start_loc 0, 1, 5, 21: row 10 is sequence 2's sixth row.
  const io::CaseDir c = load_multi("m02_soa_4bit_nc_sinks_q1-4-16");
  ASSERT_EQ(c.query_start_loc.values, (std::vector<std::int32_t>{0, 1, 5, 21}));
  Codebook storage;
  const Codebook* codebook = case_codebook(c, &storage);
  std::vector<float> output = c.expected_out.values;
  const int row = 10, head = 3, dim = 7;
  output[(static_cast<std::size_t>(row) * c.num_q_heads + head) * c.head_dim() + dim] += 0.5f;
  ValidationInputs in = case_validation_inputs(c, codebook, output, "expected_out.npy");
  in.threads = 2;
  ValidationReport r;
  ASSERT_TRUE(validate_output(in, &r).ok());
  EXPECT_FALSE(r.pass);
  const Comparison& g = r.vs_golden();
  EXPECT_EQ(g.worst_row, row);
  EXPECT_EQ(g.worst_seq, 2);
  EXPECT_EQ(g.worst_head, head);
  EXPECT_EQ(g.max_row, row);
  EXPECT_EQ(g.max_seq, 2);
  EXPECT_EQ(g.max_dim, dim);
  const std::string text = render_report(r);
  EXPECT_NE(text.find("worst head: sequence 2 row 10, head 3"), std::string::npos) << text;
  EXPECT_NE(text.find("max abs error vs golden at sequence 2 row 10, head 3, dim 7"), std::string::npos) << text;
}

TEST(MultiValidateRows, AnOutputOfOneRowPerSequenceIsRefused) {
  const io::CaseDir c = load_multi("m01_soa_4bit_nc_q1-4-16");
  Codebook storage;
  const Codebook* codebook = case_codebook(c, &storage);
  const std::vector<float> short_output(static_cast<std::size_t>(c.batch) * c.num_q_heads * c.head_dim());
  ValidationInputs in = case_validation_inputs(c, codebook, short_output, "out");
  ValidationReport r;
  const Status s = validate_output(in, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("output"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[21, 8, 128]"), std::string::npos) << s.message();
}

TEST(MultiValidateRows, SinksAndTheWindowChangeTheOracle) {
  // The same case without its sinks (m02) or window (m04) is another attention:
  // the golden output then fails against reference_out_f64's own.
  for (const char* name : {"m02_soa_4bit_nc_sinks_q1-4-16", "m04_aos_4bit_nc_window64_q1-8"}) {
    const io::CaseDir c = load_multi(name);
    Codebook storage;
    const Codebook* codebook = case_codebook(c, &storage);
    const std::vector<float> gold = golden(c, codebook);
    ValidationInputs in = case_validation_inputs(c, codebook, gold, "golden");
    in.sinks = {};
    in.sliding_window = 0;
    in.threads = 2;
    ValidationReport r;
    ASSERT_TRUE(validate_output(in, &r).ok());
    EXPECT_GT(r.row(kF64DequantVsReference)->cmp.rel_l2, 1e-3) << name;
    EXPECT_GT(r.vs_golden().rel_l2, 1e-3) << name;  // the golden decode lost them too
  }
}

}  // namespace
}  // namespace turboquant::checks
