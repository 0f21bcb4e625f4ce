// Codebook tests: vllm_codebook must reproduce vLLM's fp32 tables bit for bit
// (tests/data/vllm-codebooks.json was produced by vLLM's own solver), and
// make_codebook must reject every table bucketize could not search.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "turboquant/codebook.hpp"

namespace {

using turboquant::Codebook;
using turboquant::StatusCode;

nlohmann::json load_reference() {
  std::ifstream in(std::string(TQ_TEST_DATA_DIR) + "/vllm-codebooks.json");
  EXPECT_TRUE(in.good()) << "cannot open vllm-codebooks.json";
  return nlohmann::json::parse(in);
}

std::string hex_of(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", std::bit_cast<std::uint32_t>(v));
  return buf;
}

// "d128_b4" -> (128, 4).
std::pair<int, int> parse_key(const std::string& key) {
  int d = 0, b = 0;
  EXPECT_EQ(std::sscanf(key.c_str(), "d%d_b%d", &d, &b), 2) << key;
  return {d, b};
}

TEST(Codebook, VllmTablesBitExact) {
  const nlohmann::json ref = load_reference();
  int compared = 0;
  for (const auto& [key, entry] : ref.at("codebooks").items()) {
    const auto [d, b] = parse_key(key);
    const Codebook& cb = turboquant::vllm_codebook(d, b);
    ASSERT_EQ(cb.bits, b) << key;
    const auto& c_hex = entry.at("centroids_hex");
    const auto& m_hex = entry.at("midpoints_hex");
    ASSERT_EQ(static_cast<int>(c_hex.size()), cb.size()) << key;
    ASSERT_EQ(static_cast<int>(m_hex.size()), cb.size() - 1) << key;
    for (int i = 0; i < cb.size(); ++i) {
      EXPECT_EQ(hex_of(cb.centroids[i]), c_hex[i].get<std::string>()) << key << " centroid " << i;
    }
    for (int i = 0; i + 1 < cb.size(); ++i) {
      EXPECT_EQ(hex_of(cb.midpoints[i]), m_hex[i].get<std::string>()) << key << " midpoint " << i;
    }
    ++compared;
  }
  // The fixture covers head_dim 64/128/256 x bits 2/3/4 at least.
  EXPECT_GE(compared, 9);
}

TEST(Codebook, SolverDoubleRoundsToTable) {
  // The double-precision solution rounds to exactly the cached fp32 centroids.
  const std::vector<double> solved = turboquant::solve_lloyd_max(128, 3);
  const Codebook& cb = turboquant::vllm_codebook(128, 3);
  ASSERT_EQ(static_cast<int>(solved.size()), cb.size());
  for (int i = 0; i < cb.size(); ++i) EXPECT_EQ(static_cast<float>(solved[i]), cb.centroids[i]) << i;
}

TEST(Codebook, SymmetricMiddleMidpointIsZero) {
  // For these tables the fp32 centroids are exact negatives of each other, so
  // the middle midpoint is exactly +0 (a tie at 0 goes to the upper centroid).
  for (int d : {64, 128, 256}) {
    for (int b : {2, 3, 4}) {
      const Codebook& cb = turboquant::vllm_codebook(d, b);
      const int n = cb.size();
      for (int i = 0; i < n; ++i) EXPECT_EQ(cb.centroids[i], -cb.centroids[n - 1 - i]) << d << "/" << b;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(cb.midpoints[n / 2 - 1]), 0u) << d << "/" << b;
      EXPECT_EQ(cb.bucketize(0.0f), n / 2);
    }
  }
}

TEST(Codebook, VllmCodebookIsCached) {
  const Codebook& first = turboquant::vllm_codebook(128, 4);
  const Codebook& second = turboquant::vllm_codebook(128, 4);
  EXPECT_EQ(&first, &second);
  EXPECT_NE(&first, &turboquant::vllm_codebook(128, 3));
}

TEST(Codebook, VllmCodebookRejectsBadArguments) {
  const auto expect_invalid = [](int d, int b, const char* needle) {
    try {
      (void)turboquant::vllm_codebook(d, b);
      ADD_FAILURE() << "no error for head_dim " << d << ", bits " << b;
    } catch (const turboquant::Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_invalid(128, 0, "bits = 0");
  expect_invalid(128, 5, "bits = 5");
  expect_invalid(0, 4, "head_dim = 0");
  expect_invalid(-8, 4, "head_dim = -8");
}

TEST(Codebook, MakeCodebookDerivesFp32Midpoints) {
  // Values whose sum is inexact in fp32, so the midpoint formula is exercised.
  const std::vector<float> c = {-1.0f, 0.1f, 0.30000001f, 1.0e7f + 1.0f};
  Codebook cb;
  ASSERT_TRUE(turboquant::make_codebook(2, c, &cb).ok());
  ASSERT_EQ(cb.bits, 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cb.centroids[i], c[i]);
  for (int i = 0; i < 3; ++i) {
    const volatile float sum = c[i] + c[i + 1];  // rounded to fp32 before halving
    EXPECT_EQ(std::bit_cast<std::uint32_t>(cb.midpoints[i]), std::bit_cast<std::uint32_t>(sum / 2.0f)) << i;
  }
}

TEST(Codebook, MakeCodebookMatchesVllmTable) {
  const Codebook& ref = turboquant::vllm_codebook(256, 4);
  Codebook cb;
  ASSERT_TRUE(turboquant::make_codebook(4, std::vector<float>(ref.centroids, ref.centroids + 16), &cb).ok());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(cb.midpoints[i], ref.midpoints[i]) << i;
}

TEST(Codebook, MakeCodebookErrors) {
  const auto expect_error = [](int bits, const std::vector<float>& c, Codebook* out, StatusCode code,
                               const char* needle) {
    const turboquant::Status s = turboquant::make_codebook(bits, c, out);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Codebook cb;
  expect_error(0, {}, &cb, StatusCode::kInvalidArgument, "bits = 0");
  expect_error(5, std::vector<float>(32, 0.0f), &cb, StatusCode::kInvalidArgument, "bits = 5");
  expect_error(2, {-1.0f, 0.0f, 1.0f}, &cb, StatusCode::kInvalidArgument, "centroids.size() = 3");
  expect_error(1, {-1.0f, 0.0f, 1.0f}, &cb, StatusCode::kInvalidArgument, "2^bits = 2");
  expect_error(2, {-1.0f, nan, 0.5f, 1.0f}, &cb, StatusCode::kNonFinite, "centroids[1] = nan");
  expect_error(2, {-1.0f, 0.0f, 0.5f, inf}, &cb, StatusCode::kNonFinite, "centroids[3] = inf");
  expect_error(2, {-1.0f, 0.5f, 0.5f, 1.0f}, &cb, StatusCode::kInvalidArgument, "centroids[2] = 0.5");
  expect_error(2, {1.0f, 0.5f, 2.0f, 3.0f}, &cb, StatusCode::kInvalidArgument, "centroids[0] = 1");
  expect_error(1, {-1.0f, 1.0f}, nullptr, StatusCode::kInvalidArgument, "out");
  // A failed call leaves *out untouched.
  cb.bits = 3;
  EXPECT_FALSE(turboquant::make_codebook(2, {0.0f, 0.0f, 0.0f, 0.0f}, &cb).ok());
  EXPECT_EQ(cb.bits, 3);
}

}  // namespace
