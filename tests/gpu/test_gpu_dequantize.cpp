// cuda::dequantize and cuda::dequantize_sequences against the golden model:
// the same bytes for every preset, layout, basis and output dtype (fp32 is the
// contract's bits, fp16 / bf16 their rounding), the sequence form writing only
// the rows below each seq_len, host pointers refused naming the argument.
#include <gtest/gtest.h>

#include <random>

#include "common/dequantize_problem.hpp"
#include "gpu_test_support.hpp"

namespace turboquant {
namespace {

using namespace testing;

// The list and sequence forms of cuda::dequantize on a problem of format f,
// in both bases and every output dtype, against dequantize_reference's bytes.
void expect_golden_bytes(const Format& f, int seed) {
  ProblemSpec s;
  s.format = f;
  s.num_kv_heads = 3;  // odd: AoS slots of 4k + 2 bytes change phase between heads
  s.seq_lens = {1, 0, 77, 16, 300};
  s.seed = seed;
  const Problem p = make_problem(s);
  for (Basis basis : {Basis::kOriginal, Basis::kRotated}) {
    for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (basis == Basis::kOriginal ? " original" : " rotated"));
      DequantOutputs want = canary_outputs(list_elements(p), t), got = canary_outputs(list_elements(p), t);
      ASSERT_TRUE(dequantize_reference(p.view(), list_args(p, want, t, basis)).ok());
      const Status st = cuda::dequantize_from_host(p.view(), list_args(p, got, t, basis));
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(got.keys, want.keys);
      EXPECT_EQ(got.values, want.values);

      const int max_seq = max_seq_of(p, 5);
      DequantOutputs seq = canary_outputs(sequence_elements(p, max_seq), t);
      const Status ss = cuda::dequantize_sequences_from_host(p.view(), sequence_args(p, seq, max_seq, t, basis));
      ASSERT_TRUE(ss.ok()) << ss.to_string();
      EXPECT_TRUE(sequences_match_list(p, seq.keys, want.keys, max_seq, t));
      EXPECT_TRUE(sequences_match_list(p, seq.values, want.values, max_seq, t));
    }
  }
}

bool has_instance(int head_dim) {
  const std::vector<int> dims = cuda::supported_head_dims();
  return std::find(dims.begin(), dims.end(), head_dim) != dims.end();
}

class GpuDequantize : public ::testing::TestWithParam<std::tuple<Preset, LayoutKind, int>> {};

TEST_P(GpuDequantize, BytesEqualTheGoldenModel) {
  TQ_REQUIRE_DEVICE();
  const auto [preset, layout, head_dim] = GetParam();
  if (!has_instance(head_dim)) GTEST_SKIP() << "no instance for " << head_dim;
  expect_golden_bytes(preset_format(preset, head_dim, layout), 5 + head_dim);
}

// The kernel is instantiated per (key bits, value bits): the pairs no preset
// uses (4-bit and FP8 keys with 3-bit values), Lloyd-Max keys without the
// norm correction, and FP8 e4b15 keys, in both layouts.
TEST(GpuDequantize, EveryBitPairAndFp8FlavourGivesTheGoldenBytes) {
  TQ_REQUIRE_DEVICE();
  int seed = 40;
  for (const int head_dim : {64, 128, 256}) {
    if (!has_instance(head_dim)) continue;
    for (const LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
      const Format formats[] = {
          make_format(head_dim, 4, 3, true, layout),
          make_format(head_dim, 3, 4, false, layout),
          make_format(head_dim, core::kFp8KeyBits, 3, false, layout),
          Format{core::kFp8KeyBits, 4, false, head_dim, layout, Fp8Format::kE4b15},
      };
      for (const Format& f : formats) {
        SCOPED_TRACE("key_bits " + std::to_string(f.key_bits) + " value_bits " + std::to_string(f.value_bits) + " " +
                     layout_name(layout) + " D" + std::to_string(head_dim) + " " + fp8_format_name(f.fp8_format));
        expect_golden_bytes(f, seed++);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PresetsLayoutsDims, GpuDequantize,
                         ::testing::Combine(::testing::ValuesIn(kAllPresets),
                                            ::testing::Values(LayoutKind::kSoA, LayoutKind::kAoS),
                                            ::testing::Values(64, 128, 256)),
                         [](const auto& info) {
                           return std::string(preset_name(std::get<0>(info.param)) + 11) + "_" +
                                  layout_name(std::get<1>(info.param)) + "_D" + std::to_string(std::get<2>(info.param));
                         });

// cuda::dequantize on device copies: the outputs one element past an aligned
// address (the element-wise store path) or aligned (vector stores), the cache
// 16-byte aligned or 2, 4 or 8 bytes past it (each load width of the code
// chunks), with the Hadamard rotation or a dense PiT (any matrix is a valid
// rotation for the contract; here random), against dequantize_reference's
// bytes.
TEST(GpuDequantize, DenseRotationAndUnalignedOutputsGiveTheGoldenBytes) {
  TQ_REQUIRE_DEVICE();
  using tq_gpu_test::DeviceMem;
  const std::vector<int> dims = cuda::supported_head_dims();
  int index = 0;
  for (Preset preset : kAllPresets) {
    for (int head_dim : {64, 128, 256}) {
      if (std::find(dims.begin(), dims.end(), head_dim) == dims.end()) continue;
      const LayoutKind layout = index % 2 ? LayoutKind::kAoS : LayoutKind::kSoA;
      const DType t = index % 3 == 0 ? DType::kFloat32 : index % 3 == 1 ? DType::kFloat16 : DType::kBFloat16;
      ProblemSpec s;
      s.format = preset_format(preset, head_dim, layout);
      s.num_kv_heads = 2;
      s.seq_lens = {33, 5};
      s.seed = 900 + index++;
      const Problem p = make_problem(s);
      std::vector<float> pit(std::size_t(head_dim) * head_dim);
      std::mt19937 rng(s.seed);
      std::uniform_real_distribution<float> u(-0.2f, 0.2f);
      for (float& x : pit) x = u(rng);
      const bool dense_ok = !s.format.fp8_keys();  // FP8 keys are not rotated: a rotation is refused
      for (const bool dense : {false, true}) {
        if (dense && !dense_ok) continue;
        for (const std::size_t misalign : {std::size_t{0}, dtype_size(t)}) {
          for (const std::size_t cache_offset : {0, 2, 4, 8}) {
            SCOPED_TRACE(std::string(preset_name(preset)) + " " + layout_name(layout) + " D" +
                         std::to_string(head_dim) + " " + dtype_name(t) + (dense ? " dense" : " hadamard") +
                         " offset " + std::to_string(misalign) + " cache offset " + std::to_string(cache_offset));
            DequantOutputs want = canary_outputs(list_elements(p), t), got = canary_outputs(list_elements(p), t);
            DequantizeArgs a = list_args(p, want, t, Basis::kOriginal);
            if (dense) a.rotation = {pit.data(), pit.size() * 4};
            ASSERT_TRUE(dequantize_reference(p.view(), a).ok());
            DeviceMem d_cache(p.cache.size()), d_slots(a.slots.bytes), d_keys(got.keys.size()),
                d_values(got.values.size()), d_rot(pit.size() * 4);
            ASSERT_EQ(cudaMemcpy(d_cache.at(cache_offset), p.cache.data(), p.cache.size(), cudaMemcpyHostToDevice),
                      cudaSuccess);
            ASSERT_EQ(cudaMemcpy(d_slots.p, a.slots.data, a.slots.bytes, cudaMemcpyHostToDevice), cudaSuccess);
            ASSERT_EQ(cudaMemcpy(d_rot.p, pit.data(), pit.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
            ASSERT_EQ(cudaMemcpy(d_keys.at(misalign), got.keys.data(), got.keys.size(), cudaMemcpyHostToDevice),
                      cudaSuccess);
            ASSERT_EQ(cudaMemcpy(d_values.at(misalign), got.values.data(), got.values.size(), cudaMemcpyHostToDevice),
                      cudaSuccess);
            DequantizeArgs da = a;
            da.slots = {d_slots.p, a.slots.bytes};
            da.keys = {d_keys.at(misalign), got.keys.size()};
            da.values = {d_values.at(misalign), got.values.size()};
            if (dense) da.rotation = {d_rot.p, pit.size() * 4};
            const Status st =
                cuda::dequantize(ConstCacheView(p.layout, d_cache.at(cache_offset), p.num_blocks), da, nullptr);
            ASSERT_TRUE(st.ok()) << st.to_string();
            ASSERT_EQ(cudaMemcpy(got.keys.data(), d_keys.at(misalign), got.keys.size(), cudaMemcpyDeviceToHost),
                      cudaSuccess);
            ASSERT_EQ(cudaMemcpy(got.values.data(), d_values.at(misalign), got.values.size(), cudaMemcpyDeviceToHost),
                      cudaSuccess);
            EXPECT_EQ(got.keys, want.keys);
            EXPECT_EQ(got.values, want.values);
          }
        }
      }
    }
  }
}

TEST(GpuDequantizeApi, HostPointersAndBadShapesAreRefused) {
  ProblemSpec s;
  s.seq_lens = {20};
  const Problem p = make_problem(s);
  DequantOutputs o = canary_outputs(list_elements(p), DType::kFloat32);
  DequantizeArgs a = list_args(p, o, DType::kFloat32, Basis::kOriginal);
  a.num_slots = -1;
  EXPECT_EQ(cuda::dequantize_can_implement(p.view(), a).code(), StatusCode::kInvalidArgument);  // no device needed
  a.num_slots = static_cast<std::int64_t>(p.slots.size());
  const ConstCacheView odd(p.layout, p.cache.data() + 1, p.num_blocks);  // codes are read as 16-bit words
  const Status so = cuda::dequantize_can_implement(odd, a);
  EXPECT_EQ(so.code(), StatusCode::kInvalidArgument) << so.to_string();
  EXPECT_NE(so.message().find("cache.data"), std::string::npos) << so.message();
  TQ_REQUIRE_DEVICE();
  a.num_slots = static_cast<std::int64_t>(p.slots.size());
  const Status st = cuda::dequantize(p.view(), a, nullptr);  // host pointers
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("cache.data"), std::string::npos) << st.message();
  std::vector<std::int64_t> bad = p.slots;
  bad[3] = p.num_blocks * 16;
  a.slots = {bad.data(), bad.size() * 8};
  const Status sb = cuda::dequantize_from_host(p.view(), a);
  EXPECT_EQ(sb.code(), StatusCode::kOutOfRange) << sb.to_string();
  EXPECT_NE(sb.message().find("slots[3]"), std::string::npos) << sb.message();
  EXPECT_TRUE(std::all_of(o.keys.begin(), o.keys.end(), [](std::uint8_t x) { return x == kDequantCanary; }));
}

}  // namespace
}  // namespace turboquant
