// Regression tests for what fuzzing and the reliability review found
// (docs/RELIABILITY.md §4 lists each finding, its fix and this test). Calls
// that crashed before their fix run in a death-test child, so that an
// unfixed library fails the test instead of killing the test binary.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>

#include "reliability/reliability_util.hpp"
#include "turboquant/io/case_dir.hpp"

namespace tq_rel {
namespace {

namespace fs = std::filesystem;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

class Findings : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }

  // Runs `child` in a death-test child whose address space is limited to 4
  // GiB, so that an unbounded allocation fails fast; it must exit with code 0
  // and print a line matching `stderr_regex`.
  static void expect_clean_exit_within_4gib(const std::function<void()>& child, const char* stderr_regex) {
    const auto limited = [&] {
      const rlimit limit{std::size_t{4} << 30, std::size_t{4} << 30};
      setrlimit(RLIMIT_AS, &limit);
      child();
    };
    EXPECT_EXIT(limited(), ::testing::ExitedWithCode(0), stderr_regex);
  }
};

// F1 (tools/io, fixed): a meta.json value nested 200,000 levels deep
// overflowed the stack in the error message (nlohmann::json::dump recurses).
TEST_F(Findings, F1_DeeplyNestedMetaJsonIsAOneLineError) {
  const fs::path dir = fs::temp_directory_path() / ("tq_rel_f1_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* key : {"preset", "head_dim", "scale", "source", "num_kv_splits"}) {
    {
      std::ofstream meta(dir / "meta.json");
      meta << "{\"preset\": \"turboquant_4bit_nc\", \"head_dim\": 64, \"block_size\": 16, \"num_kv_heads\": 1, "
              "\"num_q_heads\": 1, \"scale\": 0.125, \""
           << key << "\": " << std::string(200000, '[') << std::string(200000, ']') << "}";
    }
    const auto child = [&]() {
          io::CaseDir c;
          const Status s = io::load_case(dir.string(), io::CaseLoadOptions::meta_only(), &c);
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          std::exit(!s.ok() && s.message().find("an array") != std::string::npos ? 0 : 1);
        };
    EXPECT_EXIT(child(),
        ::testing::ExitedWithCode(0), "an array")
        << key;
  }
  fs::remove_all(dir);
}

// F7 (tools/io, fixed): a number beyond double in meta.json ("scale": 1e999)
// made nlohmann::json throw out_of_range, which escaped load_case as an
// exception (fuzz_case_dir; tq printed "unexpected error"). Now the usual
// one-line "invalid JSON" Status naming the file.
TEST_F(Findings, F7_NumberOverflowInMetaJsonIsAStatus) {
  const fs::path dir = fs::temp_directory_path() / ("tq_rel_f7_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* number : {"1e999", "-1e999", "222222222222222e2222222222222"}) {
    std::ofstream(dir / "meta.json") << "{\"preset\": \"turboquant_4bit_nc\", \"head_dim\": 64, \"block_size\": 16, "
                                        "\"num_kv_heads\": 1, \"num_q_heads\": 1, \"scale\": "
                                     << number << "}";
    io::CaseDir c;
    Status s;
    EXPECT_NO_THROW(s = io::load_case(dir.string(), io::CaseLoadOptions::meta_only(), &c)) << number;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("meta.json: invalid JSON: "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("number overflow"), std::string::npos) << s.message();
  }
  fs::remove_all(dir);
}

// F2 (src/validate.cpp): validate_encode computed num_blocks * block_size
// in int64 without a bound: a cache view of 2^62 blocks overflowed (UBSan,
// fuzz_encode). Fix: validate_cache rejects num_blocks * block_bytes > 2^63.
TEST_F(Findings, F2_HugeNumBlocksIsRejectedWithoutOverflow) {
  const BlockLayout l{core::preset_format(Preset::k4BitNc, 64), 16, 2};
  std::vector<std::uint8_t> memory(64);
  std::vector<float> kv(2 * 64, 1.0f);
  std::vector<std::int64_t> slot{5};
  for (std::int64_t num_blocks : {std::int64_t{1} << 62, INT64_MAX, INT64_MAX / l.block_bytes() + 1}) {
    EncodeArgs e;
    e.keys = e.values = {kv.data(), kv.size() * 4};
    e.num_tokens = 1;
    e.slot_mapping = {slot.data(), 8};
    const Status s = validate_encode(ConstCacheView(l, memory.data(), num_blocks), e);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << num_blocks << ": " << s.to_string();
    EXPECT_NE(s.message().find("cache.num_blocks = " + std::to_string(num_blocks)), std::string::npos) << s.message();
  }
  // The largest num_blocks whose bytes fit is still accepted.
  EncodeArgs e;
  e.keys = e.values = {kv.data(), kv.size() * 4};
  e.num_tokens = 1;
  e.slot_mapping = {slot.data(), 8};
  EXPECT_TRUE(validate_encode(ConstCacheView(l, memory.data(), INT64_MAX / l.block_bytes()), e).ok());
}

// F3 (src/validate.cpp): buffer sizes were products of user integers
// (batch * num_q_heads * head_dim * dtype size, num_tokens * Hk * D * size,
// num_tokens * 8) that overflowed int64 (UBSan) or wrapped in size_t. Fix:
// checked products; a shape beyond 2^63 bytes is kOutOfRange.
TEST_F(Findings, F3_ShapesWhoseByteSizeOverflowsAreRejected) {
  const BlockLayout l{core::preset_format(Preset::k4BitNc, 512), 16, 1};
  std::vector<std::uint8_t> cache(l.block_bytes());
  std::vector<float> small(64);
  DecodeArgs a;
  a.query = {small.data(), small.size() * 4};
  a.out = {small.data(), small.size() * 4};
  a.batch = INT_MAX;
  a.num_q_heads = INT_MAX;  // rows = 2^62: rows * 512 * 4 overflows int64
  a.softmax_scale = 1.0f;
  Status s = validate_decode(ConstCacheView(l, cache.data(), 1), a);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("query [2147483647, 2147483647, 512] float32 needs more than 2^63 bytes"),
            std::string::npos)
      << s.message();

  EncodeArgs e;
  e.keys = e.values = {small.data(), small.size() * 4};
  e.num_tokens = std::int64_t{1} << 62;  // * Hk * 512 * 4 overflows int64
  s = validate_encode(ConstCacheView(l, cache.data(), 1), e);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("keys [4611686018427387904, 1, 512] float32 needs more than 2^63 bytes"),
            std::string::npos)
      << s.message();
}

// F4 (cpu/reference/dequantize_ref.cpp): num_slots = 2^61 made every byte
// count wrap to 0 in size_t, so null buffers passed the checks and the slot
// loop read address 0 (SIGSEGV). Fix: bound num_slots before multiplying.
TEST_F(Findings, F4_DequantizeWithAHugeSlotCountIsRejected) {
  const auto child = [&]() {
        const BlockLayout l{core::preset_format(Preset::k4BitNc, 128), 16, 8};
        std::vector<std::uint8_t> cache(l.block_bytes());
        DequantizeArgs a;
        a.num_slots = std::int64_t{1} << 61;  // all buffers null
        const Status s = dequantize_reference(ConstCacheView(l, cache.data(), 1), a);
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        std::exit(s.code() == StatusCode::kOutOfRange ? 0 : 1);
      };
  EXPECT_EXIT(child(),
      ::testing::ExitedWithCode(0), "num_slots = 2305843009213693952");
}

// F5 (src/validate.cpp + split_plan.hpp): seq_len near INT32_MAX
// overflowed the 32-bit tile loop `for (t = begin; t < end; t += 16)` of every
// decode (decode_cpu: SIGSEGV after 27 s at seq_len 2147483647, 1 split).
// Fix: validate_decode rejects seq_lens above core::kMaxSeqLen (2^30).
TEST_F(Findings, F5_SequencesLongerThanTheMaximumAreRejected) {
  const BlockLayout l{core::preset_format(Preset::k4BitNc, 32), 4096, 1};
  std::vector<std::uint8_t> cache(l.block_bytes());
  const int max_blocks = INT_MAX / 4096 + 1;  // 524288 entries, all block 0
  std::vector<std::int32_t> table(max_blocks, 0);
  std::vector<float> q(32, 0.5f), out(32);
  for (std::int32_t len : {INT_MAX, INT_MAX - 15, (1 << 30) + 1, 1 << 30}) {
    std::vector<std::int32_t> lens{len};
    const DecodeArgs a = tqt::host_decode_args(tqt::bytes_of(q), 1, 1, tqt::bytes_of(table), max_blocks,
                                               tqt::bytes_of(lens), 0.1f, 32, tqt::writable_bytes_of(out), {});
    const Status s = validate_decode(ConstCacheView(l, cache.data(), 1), a);  // never decode these
    if (len <= (1 << 30)) {
      EXPECT_TRUE(s.ok()) << len << ": " << s.to_string();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << len << ": " << s.to_string();
      EXPECT_NE(s.message().find("seq_lens[0] = " + std::to_string(len) + " exceeds the maximum sequence length 1073741824"),
                std::string::npos)
          << s.message();
    }
  }
}

// F9 (cpu/reference/decode_ref.cpp): decode_reference allocates
// num_splits x group partials of head_dim floats before looking at the batch:
// batch 0 with num_q_heads = 2^28 (valid: no buffer is needed) asked for
// terabytes and std::bad_alloc escaped (fuzz_decode). Fix: return after
// validation when batch == 0 (decode_cpu already does). Run in a child with a
// 4 GiB address-space limit so that an unfixed library fails fast.
TEST_F(Findings, F9_EmptyBatchWithHugeGroupAllocatesNothing) {
  if (kSanitized) GTEST_SKIP() << "address-space limits do not mix with sanitizer shadow memory";
  expect_clean_exit_within_4gib([] {
    const BlockLayout l{core::preset_format(Preset::k4BitNc, 32), 16, 1};
    std::vector<std::uint8_t> cache(l.block_bytes());
    DecodeArgs a;
    a.batch = 0;
    a.num_q_heads = 1 << 28;
    a.softmax_scale = 1.0f;
    a.num_splits = 1024;
    for (const DecodeBackend& be : decode_backends()) {
      try {
        const Status s = be.decode(ConstCacheView(l, cache.data(), 1), a);
        if (!s.ok()) std::exit(2);
      } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "std::bad_alloc escaped %s\n", be.name.c_str());
        std::exit(1);
      }
    }
    std::fprintf(stderr, "all returned\n");
    std::exit(0);
  }, "all returned");
}

#if TQ_REL_HAVE_CPU
// F6 (cpu/decode_cpu.cpp): the CPU backend sizes its workspace as batch x
// Hk x num_splits x group x (D + 16) floats whatever the sequence lengths:
// 4096 one-token sequences x 32 heads x 1024 splits asked for 77 GB, and
// std::bad_alloc escaped the Status API (or the OOM killer struck). Fix:
// process sequences in chunks of bounded workspace (or map bad_alloc to a
// Status). Run in a child with a 4 GiB address-space limit.
TEST_F(Findings, F6_DecodeCpuWorkspaceIsBoundedAndNeverThrows) {
  if (kSanitized) GTEST_SKIP() << "address-space limits do not mix with sanitizer shadow memory";
  expect_clean_exit_within_4gib([] {
    const BlockLayout l{core::preset_format(Preset::k4BitNc, 128), 16, 8};
    std::vector<std::uint8_t> cache(l.block_bytes(), 0);
    const int batch = 4096, hq = 32;
    std::vector<std::int32_t> table(batch, 0), lens(batch, 1);
    std::vector<float> q(std::size_t(batch) * hq * 128, 0.1f), out(q.size());
    const DecodeArgs a = tqt::host_decode_args(tqt::bytes_of(q), batch, hq, tqt::bytes_of(table), 1, tqt::bytes_of(lens),
                                               0.1f, 1024, tqt::writable_bytes_of(out), {});
    try {
      const Status s = decode_cpu(ConstCacheView(l, cache.data(), 1), a);
      std::fprintf(stderr, "returned %s\n", s.to_string().c_str());
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "std::bad_alloc escaped decode_cpu\n");
      std::exit(1);
    }
    std::exit(0);
  }, "returned");
}
#endif

}  // namespace
}  // namespace tq_rel
