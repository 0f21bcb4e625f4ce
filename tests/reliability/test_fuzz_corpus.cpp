// Replays every committed fuzz corpus file (tests/fuzz/corpus/<target>/)
// through the same target code libFuzzer runs, so that every input the
// fuzzers kept, every seed and every past crash is a regression test in the
// ordinary (g++, ASan/UBSan under `make sanitize`) test suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "fuzz/fuzz_case_dir.hpp"
#include "fuzz/fuzz_decode.hpp"
#include "fuzz/fuzz_decode_rows.hpp"
#include "fuzz/fuzz_encode.hpp"
#include "fuzz/fuzz_npy.hpp"

[[noreturn]] void tq_fuzz::fail(const char* what) { throw std::logic_error(what); }

namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(TQ_TEST_DATA_DIR) / ".." / "fuzz" / "corpus";

void replay(const char* target, int (*run)(const std::uint8_t*, std::size_t)) {
  const fs::path dir = kCorpus / target;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      run(bytes.data(), bytes.size());
    } catch (const std::exception& ex) {
      ADD_FAILURE() << target << " input " << e.path().filename() << ": " << ex.what();
    }
    ++files;
  }
  std::printf("[ REPLAYED ] %s: %d corpus files\n", target, files);
  EXPECT_GT(files, 0);
}

TEST(FuzzCorpus, Npy) { replay("npy", tq_fuzz::fuzz_npy); }
TEST(FuzzCorpus, CaseDir) { replay("case_dir", tq_fuzz::fuzz_case_dir); }
TEST(FuzzCorpus, Decode) { replay("decode", tq_fuzz::fuzz_decode); }
TEST(FuzzCorpus, DecodeRows) { replay("decode_rows", tq_fuzz::fuzz_decode_rows); }
TEST(FuzzCorpus, Encode) { replay("encode", tq_fuzz::fuzz_encode); }

}  // namespace
