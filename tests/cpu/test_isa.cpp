// ISA selection of the CPU backend: the list of runnable ISAs, the names the
// paths report, forcing one by option or by TURBOQUANT_ISA, the errors for
// unknown or unavailable ones (reported before anything is written), and
// every ISA implementing both layouts (no kUnsupported for AoS on a CPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>

#include "common/random_problem.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant {
namespace {

// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(CpuIsa, AvailableListStartsWithScalar) {
  const auto isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), "scalar");
  std::set<std::string> seen;
  for (const std::string& name : isas) {
    EXPECT_TRUE(name == "scalar" || name == "avx2" || name == "avx512") << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " listed twice";
  }
  if (seen.count("avx512")) {
    EXPECT_TRUE(seen.count("avx2")) << "avx512 kernels imply avx2 ones";
  }
  std::string list;
  for (const std::string& name : isas) list += name + " ";
  std::printf("[ isas ] %s\n", list.c_str());
}

TEST(CpuIsa, EveryPathReportsItsName) {
  ScopedEnv env("TURBOQUANT_ISA", nullptr);
  const auto isas = available_isas();
  EXPECT_EQ(cpu_backend_name(), "cpu:" + isas.back()) << "the default is the best ISA";
  for (const std::string& name : isas) EXPECT_EQ(cpu_backend_name(CpuOptions{0, name}), "cpu:" + name);
  EXPECT_EQ(cpu_backend_name(CpuOptions{0, "sse9"}), "");
}

TEST(CpuIsa, EnvironmentForcesAnIsaAndOptionsOverrideIt) {
  {
    ScopedEnv env("TURBOQUANT_ISA", "scalar");
    EXPECT_EQ(cpu_backend_name(), "cpu:scalar");
    EXPECT_EQ(cpu_backend_name(CpuOptions{0, available_isas().back()}), "cpu:" + available_isas().back());
  }
  {
    ScopedEnv env("TURBOQUANT_ISA", "");
    EXPECT_EQ(cpu_backend_name(), "cpu:" + available_isas().back()) << "empty means unset";
  }
}

// Every CPU ISA implements both layouts and both FP8 flavours: supports()
// says ok and decode / encode run and give the golden model's bits (the
// grids of test_cpu_decode_exact.cpp / test_cpu_encode_exact.cpp compare
// much more; this names the ISA that lacks a path).
TEST(CpuIsa, EveryIsaImplementsBothLayouts) {
  for (const Format& f : {preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS),
                          preset_format(Preset::kK8V4, 64, LayoutKind::kAoS, Fp8Format::kE4b15),
                          preset_format(Preset::kK3V4Nc, 64, LayoutKind::kSoA)}) {
    testing::ProblemSpec spec;
    spec.format = f;
    spec.seq_lens = {40, 3};
    const testing::Problem p = testing::make_problem(spec);
    std::vector<float> want_out, want_lse;
    ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse)).ok());
    for (const std::string& isa : available_isas()) {
      const std::string what = "cpu:" + isa + " " + describe(f);
      const Backend* b = find_backend("cpu:" + isa);
      ASSERT_NE(b, nullptr) << what;
      std::vector<float> out, lse;
      const DecodeArgs a = p.args(out, lse);
      EXPECT_TRUE(b->supports(p.view(), a, BackendOptions{1}).ok()) << what;
      const Status s = decode_cpu(p.view(), a, CpuOptions{1, isa});
      ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
      EXPECT_EQ(std::memcmp(out.data(), want_out.data(), out.size() * 4), 0) << what << ": out bits differ";
      EXPECT_EQ(std::memcmp(lse.data(), want_lse.data(), lse.size() * 4), 0) << what << ": lse bits differ";
      std::vector<std::uint8_t> cache(p.cache.size(), 0);
      const Status e = encode_cpu(CacheView{p.layout, cache.data(), p.num_blocks}, p.encode_args(), CpuOptions{1, isa});
      ASSERT_TRUE(e.ok()) << what << ": " << e.to_string();
      EXPECT_TRUE(cache == p.cache) << what << ": encode bytes differ from the golden encode";
    }
  }
}

class CpuIsaErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ProblemSpec spec;
    spec.seq_lens = {40, 3};
    problem_ = testing::make_problem(spec);
  }
  testing::Problem problem_;
};

TEST_F(CpuIsaErrors, UnknownIsaIsBackendUnavailableAndWritesNothing) {
  ScopedEnv env("TURBOQUANT_ISA", nullptr);
  std::vector<float> out, lse;
  const DecodeArgs a = problem_.args(out, lse);
  const Status s = decode_cpu(problem_.view(), a, CpuOptions{0, "avx1024"});
  EXPECT_EQ(s.code(), StatusCode::kBackendUnavailable);
  EXPECT_NE(s.message().find("avx1024"), std::string::npos) << s.message();
  for (float x : out) ASSERT_EQ(x, -7.0f);
  for (float x : lse) ASSERT_EQ(x, -7.0f);

  std::vector<std::uint8_t> cache = problem_.cache;
  const EncodeArgs e = problem_.encode_args();
  const Status es = encode_cpu(CacheView{problem_.layout, cache.data(), problem_.num_blocks}, e, CpuOptions{0, "x"});
  EXPECT_EQ(es.code(), StatusCode::kBackendUnavailable);
  EXPECT_EQ(cache, problem_.cache);
}

TEST_F(CpuIsaErrors, EnvironmentValueIsNamedInTheError) {
  ScopedEnv env("TURBOQUANT_ISA", "neon");
  std::vector<float> out, lse;
  const Status s = decode_cpu(problem_.view(), problem_.args(out, lse));
  EXPECT_EQ(s.code(), StatusCode::kBackendUnavailable);
  EXPECT_NE(s.message().find("TURBOQUANT_ISA"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("neon"), std::string::npos) << s.message();
  EXPECT_EQ(cpu_backend_name(), "");
  EXPECT_TRUE(decode_cpu(problem_.view(), problem_.args(out, lse), CpuOptions{0, "scalar"}).ok());
}

TEST_F(CpuIsaErrors, InvalidArgumentsAreReportedFirst) {
  std::vector<float> out, lse;
  DecodeArgs a = problem_.args(out, lse);
  std::vector<std::int32_t> table = problem_.block_table;
  table[1] = 999;
  a.block_table = {table.data(), table.size() * 4};
  const Status s = decode_cpu(problem_.view(), a);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  for (float x : out) ASSERT_EQ(x, -7.0f);

  const Status t = decode_cpu(problem_.view(), problem_.args(out, lse), CpuOptions{-1, ""});
  EXPECT_EQ(t.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.message().find("threads"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace turboquant
