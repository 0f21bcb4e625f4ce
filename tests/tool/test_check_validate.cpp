// turboquant::check's validate_output on a real vLLM case: the case's own
// output passes, a perturbed one fails at the perturbed (sequence, head), bad
// arguments are a Status naming them, and the format error is measured only
// when the original K/V are given.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "turboquant/check/case_inputs.hpp"
#include "turboquant/io/case_dir.hpp"

namespace turboquant::checks {
namespace {

namespace fs = std::filesystem;

class CheckValidate : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path dir = fs::path(TQ_TEST_DATA_DIR) / "vllm-soa" / "s01_4bit_nc_d128_bs16_gqa4";
    io::CaseLoadOptions load = io::CaseLoadOptions::decode();
    load.expected_out = load.keys = load.values = load.slot_mapping = load.reference_out_f64 = io::Need::kRequired;
    ASSERT_TRUE(io::load_case(dir.string(), load, &c_).ok());
    ASSERT_TRUE(c_.centroids.present);
    ASSERT_TRUE(make_codebook(c_.format.key_bits, c_.centroids.values, &codebook_).ok());
    output_ = c_.expected_out.values;
  }

  // The case's inputs with output_ under test and, when `original`, its K/V.
  ValidationInputs inputs(bool original) const {
    ValidationInputs in = case_validation_inputs(c_, &codebook_, output_, "expected_out.npy");
    if (!original) in.original.reset();
    in.threads = 2;
    return in;
  }

  std::size_t at(int seq, int head, int dim) const {
    return (static_cast<std::size_t>(seq) * c_.num_q_heads + head) * c_.head_dim() + dim;
  }

  io::CaseDir c_;
  Codebook codebook_;
  std::vector<float> output_;
};

TEST_F(CheckValidate, ExpectedOutPasses) {
  ValidationReport r;
  ASSERT_TRUE(validate_output(inputs(true), &r).ok());
  EXPECT_TRUE(r.pass);
  EXPECT_LT(r.vs_golden().rel_l2, 1e-5);
  EXPECT_EQ(r.vs_golden().non_finite, 0);
  EXPECT_EQ(r.oracle_non_finite, 0);
  ASSERT_EQ(r.rows.size(), 6u);
  EXPECT_EQ(r.rows[0].key, kVsGolden);
  EXPECT_EQ(r.rows[0].name, "expected_out.npy vs golden");
  ASSERT_NE(r.row(kF64DequantVsReference), nullptr);
  EXPECT_LT(r.row(kF64DequantVsReference)->cmp.rel_l2, 1e-6);
  const std::string text = render_report(r);
  EXPECT_NE(text.find("PASS  expected_out.npy: rel L2 vs golden"), std::string::npos) << text;
}

TEST_F(CheckValidate, PerturbedOutputFailsWhereItWasPerturbed) {
  output_[at(2, 5, 17)] += 0.5f;
  ValidationReport r;
  ASSERT_TRUE(validate_output(inputs(true), &r).ok());
  EXPECT_FALSE(r.pass);
  const Comparison& g = r.vs_golden();
  EXPECT_GT(g.rel_l2, r.rtol);
  EXPECT_EQ(g.worst_seq, 2);
  EXPECT_EQ(g.worst_head, 5);
  EXPECT_EQ(g.max_seq, 2);
  EXPECT_EQ(g.max_head, 5);
  EXPECT_EQ(g.max_dim, 17);
  EXPECT_NEAR(g.max_abs, 0.5, 1e-5);
  const std::string text = render_report(r);
  EXPECT_NE(text.find("FAIL  expected_out.npy: rel L2 vs golden"), std::string::npos) << text;
  EXPECT_NE(text.find("worst head: sequence 2, head 5"), std::string::npos) << text;
}

TEST_F(CheckValidate, NullOrMisSizedOutputIsAnError) {
  ValidationInputs in = inputs(true);
  in.output = {};
  ValidationReport r;
  Status s = validate_output(in, &r);
  EXPECT_EQ(s.code(), StatusCode::kBufferTooSmall);
  EXPECT_EQ(s.message(), "output is null but must hold [3, 8, 128] float32");

  in.output = std::span<const float>(output_).first(output_.size() - 1);
  s = validate_output(in, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "output has 3071 elements but [3, 8, 128] float32 has 3072");

  in = inputs(true);
  in.rtol = -1;
  EXPECT_EQ(validate_output(in, &r).message(), "rtol = -1: must be a finite number >= 0");
  EXPECT_EQ(validate_output(inputs(true), nullptr).message(), "report is null");
}

TEST_F(CheckValidate, FormatErrorOnlyWithTheOriginalKV) {
  ValidationReport with, without;
  ASSERT_TRUE(validate_output(inputs(true), &with).ok());
  ASSERT_TRUE(validate_output(inputs(false), &without).ok());

  ASSERT_NE(with.format_error(), nullptr);
  EXPECT_TRUE(with.format_error_measured);
  EXPECT_TRUE(with.original_note.empty());
  EXPECT_GT(with.format_error()->rel_l2, 1e-3);  // 4-bit keys and values lose more than the golden rounding
  EXPECT_NE(with.row(kVsF64Original), nullptr);

  EXPECT_EQ(without.format_error(), nullptr);
  EXPECT_FALSE(without.format_error_measured);
  EXPECT_EQ(without.row(kFormatError), nullptr);
  EXPECT_EQ(without.row(kVsF64Original), nullptr);
  EXPECT_EQ(without.rows.size(), 4u);
  EXPECT_EQ(without.original_note, "the case has no keys.npy/values.npy/slot_mapping.npy");
  EXPECT_NE(render_report(without).find("(format error not measured: " + without.original_note + ")"),
            std::string::npos);
  // The rows both have are the same numbers.
  EXPECT_EQ(with.vs_golden().rel_l2, without.vs_golden().rel_l2);

  ValidationInputs bad = inputs(true);
  bad.original->keys = bad.original->keys.first(10);
  const Status s = validate_output(bad, &with);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("keys has 10 elements but [338, 2, 128] float32", 0), 0u) << s.message();
}

TEST_F(CheckValidate, ThreadCountDoesNotChangeTheNumbers) {
  output_[at(1, 3, 0)] += 1e-3f;
  ValidationInputs one = inputs(true), many = inputs(true);
  one.threads = 1;
  many.threads = 7;
  ValidationReport a, b;
  ASSERT_TRUE(validate_output(one, &a).ok());
  ASSERT_TRUE(validate_output(many, &b).ok());
  EXPECT_EQ(render_report(a), render_report(b));
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    const Comparison &x = a.rows[i].cmp, &y = b.rows[i].cmp;
    EXPECT_EQ(x.rel_l2, y.rel_l2) << a.rows[i].key;
    EXPECT_EQ(x.max_abs, y.max_abs) << a.rows[i].key;
    EXPECT_EQ(x.cosine, y.cosine) << a.rows[i].key;
    EXPECT_EQ(x.worst_rel_l2, y.worst_rel_l2) << a.rows[i].key;
  }
}

TEST_F(CheckValidate, DecodeArgumentErrorsAreTheGoldenModels) {
  std::vector<std::int32_t> table = c_.block_table.values;
  table[1] = 999;  // sequence 0's second entry: seq_len 1 reads only the first
  table[static_cast<std::size_t>(c_.max_blocks_per_seq)] = 999;  // sequence 1, block 0
  ValidationInputs in = inputs(true);
  in.block_table = table;
  ValidationReport r;
  const Status s = validate_output(in, &r);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "block_table[1][0] = 999 is outside [0, 26) (num_blocks)");
}

}  // namespace
}  // namespace turboquant::checks
