// Runs the tq binary (path compiled in as TQ_BINARY) and captures its exit
// code, stdout and stderr; scratch directories live in the build tree.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace tq_test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const fs::path kCases = fs::path(TQ_TEST_DATA_DIR) / "vllm-soa";
inline const char* const kCaseNames[] = {"s01_4bit_nc_d128_bs16_gqa4", "s02_k8v4_d128_bs16_gqa4",
                                         "s03_k3v4_nc_d64_bs32_mha", "s04_3bit_nc_d256_bs16_gqa8",
                                         "s05_4bit_nc_d128_bs64_sharp"};

struct Result {
  int exit_code = -1;  // -1: killed by a signal (a crash)
  std::string out, err;
  json parsed() const {
    json j;
    try {
      j = json::parse(out);
    } catch (const json::parse_error& e) {
      ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << out;
    }
    return j;
  }
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A scratch directory per test, under the build tree.
inline fs::path scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const fs::path dir = fs::path(TQ_CLI_SCRATCH_DIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline Result tq(const std::string& args) {
  const fs::path dir = fs::path(TQ_CLI_SCRATCH_DIR) / "io" / std::to_string(::getpid());
  fs::create_directories(dir);
  const std::string cmd = std::string("'") + TQ_BINARY + "' " + args + " >'" + (dir / "out").string() + "' 2>'" +
                          (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

inline std::string q(const fs::path& p) {
  std::string s(1, '\'');
  s.append(p.string()).push_back('\'');
  return s;
}

// Exit 2, one line on stderr starting "tq <cmd>: " and naming every fragment.
inline void expect_bad_input(const Result& r, const std::string& cmd, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_EQ(r.err.rfind("tq " + cmd + ": ", 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  for (const std::string& f : fragments)
    EXPECT_NE(r.err.find(f), std::string::npos) << "missing \"" << f << "\": " << r.err;
}

}  // namespace tq_test
