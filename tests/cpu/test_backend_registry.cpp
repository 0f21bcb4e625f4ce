// The registry of backends (include/turboquant/backend.hpp): every backend of
// the build is listed, an available one reproduces the golden model on a small
// encode, decode and dequantize, an unavailable one says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "common/random_problem.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::ProblemSpec;

Problem small_problem(Preset preset) {
  ProblemSpec spec;
  spec.format = core::preset_format(preset, 128);
  spec.seq_lens = {37, 1, 70};
  spec.seed = 11;
  return make_problem(spec);
}

EncodeArgs encode_args(const Problem& p) {
  EncodeArgs e;
  e.keys = {p.keys.data(), p.keys.size() * 4};
  e.values = {p.values.data(), p.values.size() * 4};
  e.num_tokens = static_cast<std::int64_t>(p.slots.size());
  e.slot_mapping = {p.slots.data(), p.slots.size() * 8};
  return e;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(err / norm);
}

TEST(BackendRegistry, ListsEveryBackendOfTheBuildOnce) {
  std::vector<std::string> names;
  for (const Backend* b : backends()) names.emplace_back(b->name());
  const std::vector<std::string> expected = {"cpu-ref", "cpu:scalar", "cpu:avx2", "cpu:avx512", "cuda:strict",
                                             "cuda:fast"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(backend_names(), "cpu-ref, cpu:scalar, cpu:avx2, cpu:avx512, cuda:strict, cuda:fast");
  for (const Backend* b : backends()) {
    EXPECT_EQ(find_backend(b->name()), b) << b->name();
    EXPECT_FALSE(b->description().empty()) << b->name();
  }
}

TEST(BackendRegistry, UnknownNamesAreNotFound) {
  for (const char* name : {"", "cpu", "cuda", "cuda-strict", "cpu:avx9000", "CPU-REF", "cpu-ref "}) {
    EXPECT_EQ(find_backend(name), nullptr) << name;
  }
}

TEST(BackendRegistry, AvailabilityMatchesThisMachineAndUnavailableOnesSayWhy) {
  const std::vector<std::string> isas = available_isas();
  for (const Backend* b : backends()) {
    const std::string name(b->name());
    SCOPED_TRACE(name);
    const Status s = b->status();
    EXPECT_EQ(b->available(), s.ok());
    if (name.rfind("cpu:", 0) == 0) {
      const bool runs = std::find(isas.begin(), isas.end(), name.substr(4)) != isas.end();
      EXPECT_EQ(b->available(), runs);
      EXPECT_TRUE(b->threaded());
    }
    if (name == "cpu-ref" || name == "cpu:scalar") {
      EXPECT_TRUE(b->available());
    }
    if (b->available()) {
      EXPECT_EQ(b->unavailable_reason(), "");
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kBackendUnavailable);
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(b->unavailable_reason(), s.message());
    if (name.rfind("cuda:", 0) == 0) {
      EXPECT_TRUE(s.message().rfind("not built with CUDA", 0) == 0 || s.message().rfind("no CUDA device", 0) == 0)
          << s.message();
    }
    // Every call of an unavailable backend fails the same way and writes nothing.
    Problem p = small_problem(Preset::k4BitNc);
    std::vector<float> out, lse;
    const DecodeArgs a = p.args(out, lse, 4);
    const Status d = b->decode(p.view(), a);
    EXPECT_EQ(d.code(), StatusCode::kBackendUnavailable);
    EXPECT_EQ(d.message(), s.message());
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == -7.0f; }));
    EXPECT_EQ(b->supports(p.view(), a).code(), StatusCode::kBackendUnavailable);
    const std::vector<std::uint8_t> before = p.cache;
    EXPECT_EQ(b->encode(CacheView{p.layout, p.cache.data(), p.num_blocks}, encode_args(p)).code(),
              StatusCode::kBackendUnavailable);
    EXPECT_TRUE(before == p.cache);
  }
}

// Bad options are the caller's mistake on every machine: reported before availability.
TEST(BackendRegistry, NegativeThreadsAreRejectedByEveryBackend) {
  Problem p = small_problem(Preset::k4BitNc);
  std::vector<float> out, lse;
  const DecodeArgs a = p.args(out, lse, 4);
  for (const Backend* b : backends()) {
    const Status s = b->decode(p.view(), a, BackendOptions{-1});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << b->name() << ": " << s.to_string();
    EXPECT_NE(s.message().find("threads = -1"), std::string::npos) << s.message();
    EXPECT_EQ(b->supports(p.view(), a, BackendOptions{-1}).code(), StatusCode::kInvalidArgument) << b->name();
  }
}

class EveryBackend : public ::testing::TestWithParam<Preset> {};

TEST_P(EveryBackend, EncodeWritesTheGoldenBytes) {
  const Problem p = small_problem(GetParam());
  const EncodeArgs e = encode_args(p);
  std::vector<std::uint8_t> want(p.cache.size(), 0x5c);
  ASSERT_TRUE(encode_reference(CacheView{p.layout, want.data(), p.num_blocks}, e).ok());
  int ran = 0;
  for (const Backend* b : backends()) {
    if (!b->available()) continue;
    for (int threads : {0, 2}) {
      SCOPED_TRACE(std::string(b->name()) + " threads " + std::to_string(threads));
      const BackendOptions o{threads};
      std::vector<std::uint8_t> got(p.cache.size(), 0x5c);
      const CacheView view{p.layout, got.data(), p.num_blocks};
      ASSERT_TRUE(b->supports(view, e, o).ok()) << b->supports(view, e, o).to_string();
      const Status s = b->encode(view, e, o);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_TRUE(got == want);
      ++ran;
    }
  }
  EXPECT_GE(ran, 4);  // cpu-ref and cpu:scalar run everywhere
}

TEST_P(EveryBackend, DecodeReproducesTheGoldenModel) {
  const Problem p = small_problem(GetParam());
  std::vector<float> want_out, want_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse, 4)).ok());
  for (const Backend* b : backends()) {
    if (!b->available()) continue;
    for (int threads : {0, 3}) {
      SCOPED_TRACE(std::string(b->name()) + " threads " + std::to_string(threads));
      const BackendOptions o{threads};
      std::vector<float> out, lse;
      const DecodeArgs a = p.args(out, lse, 4);
      ASSERT_TRUE(b->supports(p.view(), a, o).ok()) << b->supports(p.view(), a, o).to_string();
      const Status s = b->decode(p.view(), a, o);
      ASSERT_TRUE(s.ok()) << s.to_string();
      if (b->exact_decode()) {
        EXPECT_EQ(std::memcmp(out.data(), want_out.data(), out.size() * 4), 0);
        EXPECT_EQ(std::memcmp(lse.data(), want_lse.data(), lse.size() * 4), 0);
      } else {
        EXPECT_LE(relative_l2(out, want_out), 1e-3);
      }
    }
  }
}

TEST_P(EveryBackend, DequantizeReproducesTheGoldenModelOrIsUnsupported) {
  const Problem p = small_problem(GetParam());
  const int n = static_cast<int>(p.slots.size());
  const std::size_t floats = std::size_t(n) * p.layout.num_kv_heads * p.layout.format.head_dim;
  std::vector<float> want_k(floats), want_v(floats);
  DequantizeArgs d;
  d.slots = {p.slots.data(), p.slots.size() * 8};
  d.num_slots = n;
  d.keys = {want_k.data(), floats * 4};
  d.values = {want_v.data(), floats * 4};
  ASSERT_TRUE(dequantize_reference(p.view(), d).ok());
  for (const Backend* b : backends()) {
    if (!b->available()) continue;
    SCOPED_TRACE(b->name());
    std::vector<float> k(floats, -7.0f), v(floats, -7.0f);
    d.keys = {k.data(), floats * 4};
    d.values = {v.data(), floats * 4};
    const Status can = b->supports(p.view(), d);
    const Status s = b->dequantize(p.view(), d);
    if (!can.ok()) {
      EXPECT_EQ(can.code(), StatusCode::kUnsupported) << can.to_string();
      EXPECT_EQ(s.code(), StatusCode::kUnsupported);
      EXPECT_NE(s.message().find("dequantize"), std::string::npos) << s.message();
      EXPECT_TRUE(std::all_of(k.begin(), k.end(), [](float x) { return x == -7.0f; }));
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(std::memcmp(k.data(), want_k.data(), floats * 4), 0);
    EXPECT_EQ(std::memcmp(v.data(), want_v.data(), floats * 4), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, EveryBackend,
                         ::testing::ValuesIn(kAllPresets),
                         [](const ::testing::TestParamInfo<Preset>& info) {
                           std::string s = preset_name(info.param);
                           for (char& c : s) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

// A backend's errors are the golden model's (same code, same message).
TEST(BackendRegistry, ErrorsAreTheGoldenModels) {
  Problem p = small_problem(Preset::k4BitNc);
  p.seq_lens[1] = 1 << 20;  // beyond the block table
  std::vector<float> out, lse;
  const DecodeArgs a = p.args(out, lse, 4);
  const Status want = decode_reference(p.view(), a);
  ASSERT_FALSE(want.ok());
  for (const Backend* b : backends()) {
    if (!b->available()) continue;
    const Status s = b->decode(p.view(), a);
    EXPECT_EQ(s.code(), want.code()) << b->name() << ": " << s.to_string();
    EXPECT_EQ(s.message(), want.message()) << b->name();
  }
}

}  // namespace
}  // namespace turboquant
