// The tq tool as a new user meets it: wrong paths, wrong files (a .json
// given as .npy, a directory, an empty file, /dev/zero, a FIFO), truncated
// downloads of every file at many cut points, garbage cache bytes. Each bad
// input must give exit 2 and one line on stderr that names the problem,
// never a crash or a hang (every run has a 60 s timeout; 124 = hung).
// The binary: $TQ_BINARY, else <build>/tools/tq/tq next to this test's
// <build>/tests/ (skipped when the tool is not built).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path tq_binary() {
  if (const char* env = std::getenv("TQ_BINARY")) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return self.parent_path().parent_path() / "tools" / "tq" / "tq";
}

const fs::path kCase = fs::path(TQ_TEST_DATA_DIR) / "vllm-soa" / "s03_k3v4_nc_d64_bs32_mha";

struct TqRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

class TqNewUser : public ::testing::Test {
 protected:
  void SetUp() override {
    tq_ = tq_binary();
    if (tq_.empty() || !fs::exists(tq_)) GTEST_SKIP() << "tq is not built (" << tq_ << ")";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tq_new_user_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  TqRun tq(const std::string& args) {
    const std::string cmd = "cd " + quote(dir_.string()) + " && timeout -k 5 60 " + quote(tq_.string()) + " " + args +
                            " >" + quote((dir_ / ".out").string()) + " 2>" + quote((dir_ / ".err").string());
    const int status = std::system(cmd.c_str());
    TqRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / ".out");
    r.err = slurp(dir_ / ".err");
    transcript_ += "$ tq " + args + "\n" + r.err + "(exit " + std::to_string(r.exit_code) + ")\n";
    return r;
  }

  // Exit 2, exactly one line on stderr, starting "tq <cmd>: " and holding `fragment`.
  void expect_one_line_reason(const TqRun& r, const std::string& cmd, const std::string& fragment) {
    EXPECT_EQ(r.exit_code, 2) << transcript_;
    EXPECT_EQ(r.err.rfind("tq " + cmd + ": ", 0), 0u) << r.err;
    EXPECT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "missing \"" << fragment << "\": " << r.err;
  }

  // A (args, message fragment) row of a table of misuses.
  struct Reason {
    std::string args;
    const char* fragment;
  };
  // Runs `tq <row.args>` for each row: a one-line reason from the command
  // named by the first word of the args.
  void expect_reasons(const std::vector<Reason>& rows) {
    for (const Reason& row : rows) expect_one_line_reason(tq(row.args), row.args.substr(0, row.args.find(' ')), row.fragment);
  }

  // A writable copy of the case.
  fs::path copy_case(const std::string& name = "case") {
    const fs::path c = dir_ / name;
    fs::copy(kCase, c);
    for (const auto& e : fs::directory_iterator(c)) fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    return c;
  }

  fs::path tq_;
  fs::path dir_;
  std::string transcript_;
};

TEST_F(TqNewUser, WrongPaths) {
  std::ofstream(dir_ / "empty_dir_marker") << "";
  fs::create_directories(dir_ / "empty_case");
  copy_case();
  expect_reasons({
      {"decode /nonexistent/case --out o.npy", "no such case directory"},
      {"decode '' --out o.npy", "CASE: an empty path"},
      {"validate " + quote((kCase / "meta.json").string()), "not a directory"},
      {"inspect empty_case", "meta.json: no such file"},
      {"decode case --out /nonexistent/dir/o.npy", "cannot open for writing"},
      {"decode case --out case", "cannot open for writing"},
      {"decode case --out /dev/full", "write failed"},
      {"validate case --output no_such_output.npy", "no such file"},
  });
  std::printf("%s", transcript_.c_str());
}

TEST_F(TqNewUser, WrongFiles) {
  const fs::path c = copy_case();
  // Each row damages a fresh copy of the case, then runs tq on it.
  const auto replace = [&](const char* file, const std::function<void(const fs::path&)>& make) {
    return [&c, file, make] {
      fs::remove(c / file);
      make(c / file);
    };
  };
  const auto write = [&](const char* file, std::string bytes) {
    return [&c, file, bytes] { std::ofstream(c / file, std::ios::trunc) << bytes; };
  };
  const auto to_dev_zero = [](const fs::path& f) { fs::create_symlink("/dev/zero", f); };
  const struct {
    std::function<void()> damage;
    Reason reason;
  } rows[] = {
      {[&] { fs::copy_file(c / "meta.json", c / "query.npy", fs::copy_options::overwrite_existing); },
       {"decode case --out o.npy", "query.npy: bad magic"}},
      {replace("query.npy", [](const fs::path& f) { fs::create_directory(f); }),
       {"decode case --out o.npy", "query.npy: is a directory"}},
      {write("kv_cache.npy", ""), {"inspect case", "kv_cache.npy: empty file"}},
      {replace("kv_cache.npy", to_dev_zero), {"decode case --out o.npy", "kv_cache.npy: not a regular file"}},
      {replace("query.npy", [](const fs::path& f) { ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0); }),
       {"decode case --out o.npy", "query.npy: not a regular file"}},
      {replace("meta.json", to_dev_zero), {"decode case --out o.npy", "meta.json: not a regular file"}},
      {write("meta.json", "\x93NUMPY\x01\x00garbage"), {"decode case --out o.npy", "meta.json: invalid JSON"}},
      {write("meta.json", "{\"preset\": " + std::string(100000, '[') + std::string(100000, ']') + "}"),
       {"decode case --out o.npy", "preset = an array must be a string"}},
      {[] {}, {"validate case --output meta.json", "meta.json: bad magic"}},
      {[] {}, {"validate case --output case", "is a directory"}},
      {[] {}, {"validate case --output kv_cache.npy", "kv_cache.npy"}},
  };
  for (const auto& row : rows) {
    fs::remove_all(c);
    copy_case();
    row.damage();
    if (HasFatalFailure()) return;
    expect_reasons({row.reason});
  }
  std::printf("%s", transcript_.c_str());
}

// A download cut short: every file of the case truncated at many points.
TEST_F(TqNewUser, TruncatedDownloadsOfEveryFile) {
  const fs::path c = copy_case();
  int runs = 0;
  for (const auto& entry : fs::directory_iterator(kCase)) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = slurp(entry.path());
    // The command that reads the file: keys/values/slot_mapping feed encode;
    // no command reads expected_lse / vllm_v2_out unless given as --output.
    const bool encode_file = name == "keys.npy" || name == "values.npy" || name == "slot_mapping.npy";
    const bool output_file = name == "expected_lse.npy" || name == "vllm_v2_out.npy";
    const std::string cmd = encode_file ? "encode" : "validate";
    const std::vector<std::size_t> cuts = {0, 9, 60, 128, bytes.size() / 2, bytes.size() - 1};
    for (std::size_t cut : cuts) {
      if (cut >= bytes.size()) continue;
      std::ofstream(c / name, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(cut));
      const std::string args = cmd + " case" + (output_file ? " --output " + name : "");
      const TqRun r = tq(args);
      ++runs;
      if (name == "meta.json") {
        EXPECT_EQ(r.exit_code, 2) << name << " cut at " << cut << ": " << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
      } else {
        expect_one_line_reason(r, cmd, name);
        EXPECT_TRUE(r.err.find("truncated") != std::string::npos || r.err.find("empty file") != std::string::npos ||
                    r.err.find("bad magic") != std::string::npos)
            << name << " cut at " << cut << ": " << r.err;
      }
    }
    std::ofstream(c / name, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::printf("[ MEASURED ] %d truncated-file runs, all one-line exit-2 errors\n", runs);
}

TEST_F(TqNewUser, GarbageCacheBytesAreReportedByInspect) {
  const fs::path c = copy_case();
  std::string bytes = slurp(c / "kv_cache.npy");
  const std::size_t header = 128;  // numpy pads the header to 128 bytes here
  std::uint32_t x = 12345;
  for (std::size_t i = header; i < bytes.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    bytes[i] = static_cast<char>(x >> 24);
  }
  std::ofstream(c / "kv_cache.npy", std::ios::binary | std::ios::trunc) << bytes;
  const TqRun inspect = tq("inspect case");
  // The report on stdout, and a failed inspection: exit 1 with one line naming the first bad value.
  EXPECT_EQ(inspect.exit_code, 1) << inspect.err;
  EXPECT_NE(inspect.out.find("non-finite metadata"), std::string::npos) << inspect.out;
  EXPECT_EQ(inspect.err.rfind("tq inspect: case/kv_cache.npy: ", 0), 0u) << inspect.err;
  EXPECT_NE(inspect.err.find("non-finite metadata values in referenced slots (first: block "), std::string::npos)
      << inspect.err;
  EXPECT_EQ(inspect.err.find('\n'), inspect.err.size() - 1) << inspect.err;
  const TqRun decode = tq("decode case --out o.npy");
  EXPECT_EQ(decode.exit_code, 0) << "garbage bytes decode (to unspecified numbers) without a crash: " << decode.err;
  const TqRun validate = tq("validate case");
  EXPECT_TRUE(validate.exit_code == 0 || validate.exit_code == 1) << validate.err;
  std::printf("%s\n%s", inspect.out.c_str(), transcript_.c_str());
}

TEST_F(TqNewUser, BadNumbersOnTheCommandLine) {
  expect_one_line_reason(tq("info --preset 4bit_nc --head-dim 100"), "info", "head_dim");
  expect_one_line_reason(tq("info --preset 5bit --head-dim 128"), "info", "5bit");
  expect_one_line_reason(tq("info --preset 4bit_nc --head-dim 128 --block-size 0"), "info", "block_size");
  expect_one_line_reason(tq("codebook --bits 4 --head-dim 2147483647"), "codebook", "--head-dim");
  expect_one_line_reason(tq("codebook --bits 9 --head-dim 128"), "codebook", "--bits");
  expect_one_line_reason(tq("bench --seq-len -5"), "bench", "--seq-len");
  expect_one_line_reason(tq("bench --splits 0"), "bench", "--splits");
  expect_one_line_reason(tq("bench --threads -1"), "bench", "--threads");
  expect_one_line_reason(tq("bench --batch 99999999999"), "bench", "--batch");
  const TqRun r = tq("no-such-command");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::printf("%s", transcript_.c_str());
}

}  // namespace
