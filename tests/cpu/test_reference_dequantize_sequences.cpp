// dequantize_reference's output dtypes and dequantize_sequences_reference (the
// block-table form of vLLM's continuation prefill): fp16 / bf16 outputs are the
// fp32 ones rounded to nearest even, the sequence form holds the list form's
// rows and writes nothing else, bad arguments are errors naming them.
#include <gtest/gtest.h>

#include <cstring>

#include "common/dequantize_problem.hpp"
#include "turboquant/core/half.hpp"

namespace turboquant {
namespace {

using namespace testing;

ProblemSpec spec(Preset preset, LayoutKind layout) {
  ProblemSpec s;
  s.format = preset_format(preset, 64, layout);
  s.num_kv_heads = 3;
  s.seq_lens = {5, 0, 40, 17};
  s.seed = 11 + static_cast<int>(preset);
  return s;
}

class DequantizeForms : public ::testing::TestWithParam<std::tuple<Preset, LayoutKind>> {};

TEST_P(DequantizeForms, HalfOutputsAreTheFloatOnesRoundedAndSequencesHoldTheListRows) {
  const auto [preset, layout] = GetParam();
  const Problem p = make_problem(spec(preset, layout));
  for (Basis basis : {Basis::kOriginal, Basis::kRotated}) {
    DequantOutputs f32 = canary_outputs(list_elements(p), DType::kFloat32);
    ASSERT_TRUE(dequantize_reference(p.view(), list_args(p, f32, DType::kFloat32, basis)).ok());
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(dtype_name(t));
      DequantOutputs list = canary_outputs(list_elements(p), t);
      ASSERT_TRUE(dequantize_reference(p.view(), list_args(p, list, t, basis)).ok());
      for (std::size_t i = 0; i < list_elements(p); ++i) {
        float k, v;
        std::memcpy(&k, f32.keys.data() + 4 * i, 4);
        std::memcpy(&v, f32.values.data() + 4 * i, 4);
        if (t == DType::kFloat32) continue;
        const std::uint16_t want_k = t == DType::kFloat16 ? core::float_to_fp16(k) : core::float_to_bf16(k);
        const std::uint16_t want_v = t == DType::kFloat16 ? core::float_to_fp16(v) : core::float_to_bf16(v);
        std::uint16_t got_k, got_v;
        std::memcpy(&got_k, list.keys.data() + 2 * i, 2);
        std::memcpy(&got_v, list.values.data() + 2 * i, 2);
        ASSERT_EQ(got_k, want_k) << "element " << i;
        ASSERT_EQ(got_v, want_v) << "element " << i;
      }
      const int max_seq = max_seq_of(p, 3);
      DequantOutputs seq = canary_outputs(sequence_elements(p, max_seq), t);
      ASSERT_TRUE(dequantize_sequences_reference(p.view(), sequence_args(p, seq, max_seq, t, basis)).ok());
      EXPECT_TRUE(sequences_match_list(p, seq.keys, list.keys, max_seq, t));
      EXPECT_TRUE(sequences_match_list(p, seq.values, list.values, max_seq, t));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PresetsAndLayouts, DequantizeForms,
                         ::testing::Combine(::testing::ValuesIn(kAllPresets),
                                            ::testing::Values(LayoutKind::kSoA, LayoutKind::kAoS)),
                         [](const auto& info) {
                           return std::string(preset_name(std::get<0>(info.param)) + 11) + "_" +
                                  layout_name(std::get<1>(info.param));
                         });

TEST(DequantizeSequences, BadArgumentsAreErrorsNamingThemAndWriteNothing) {
  const Problem p = make_problem(spec(Preset::k4BitNc, LayoutKind::kAoS));
  const int max_seq = max_seq_of(p, 0);
  DequantOutputs o = canary_outputs(sequence_elements(p, max_seq), DType::kFloat32);
  auto expect = [&](DequantizeSequencesArgs a, StatusCode code, const std::string& text) {
    const Status s = dequantize_sequences_reference(p.view(), a);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
    EXPECT_TRUE(std::all_of(o.keys.begin(), o.keys.end(), [](std::uint8_t x) { return x == kDequantCanary; }));
  };
  const DequantizeSequencesArgs good = sequence_args(p, o, max_seq, DType::kFloat32, Basis::kOriginal);
  DequantizeSequencesArgs a = good;
  a.max_seq = max_seq - 1;
  a.keys.bytes = a.values.bytes = sequence_elements(p, max_seq - 1) * 4;
  expect(a, StatusCode::kOutOfRange, "exceeds max_seq");
  a = good;
  a.max_seq = -1;
  expect(a, StatusCode::kInvalidArgument, "max_seq = -1");
  a = good;
  a.keys.bytes -= 1;
  expect(a, StatusCode::kBufferTooSmall, "keys has");
  a = good;
  a.out_dtype = static_cast<DType>(9);
  expect(a, StatusCode::kInvalidArgument, "out_dtype = 9");
  std::vector<std::int32_t> table = p.block_table;
  table[2 * p.max_blocks + 1] = static_cast<std::int32_t>(p.num_blocks);
  a = good;
  a.block_table = {table.data(), table.size() * 4};
  expect(a, StatusCode::kOutOfRange, "block_table[2][1]");
  std::vector<std::int32_t> lens = p.seq_lens;
  lens[3] = -4;
  a = good;
  a.seq_lens = {lens.data(), lens.size() * 4};
  expect(a, StatusCode::kInvalidArgument, "seq_lens[3] = -4");
}

TEST(DequantizeList, BadOutDtypeAndBasisAreErrors) {
  const Problem p = make_problem(spec(Preset::kK8V4, LayoutKind::kSoA));
  DequantOutputs o = canary_outputs(list_elements(p), DType::kFloat32);
  DequantizeArgs a = list_args(p, o, DType::kFloat32, Basis::kOriginal);
  a.out_dtype = static_cast<DType>(7);
  EXPECT_EQ(dequantize_reference(p.view(), a).code(), StatusCode::kInvalidArgument);
  a.out_dtype = DType::kFloat16;  // half the bytes are needed: the float32-sized buffers pass
  a.basis = static_cast<Basis>(5);
  const Status s = dequantize_reference(p.view(), a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("basis = 5"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace turboquant
