// tq as a new user meets it (issue 6): mistyped commands, bad option values,
// empty paths, wrong kinds of files (a PNG, a text file named .npy), garbage
// bytes quoted in messages, and a cache whose metadata is NaN. Each must give
// exactly one line on stderr naming the argument and the value, and a
// non-zero exit (2 for bad input, 1 when inspect finds a broken cache).
#include <cmath>
#include <cstring>
#include <limits>

#include "tq_runner.hpp"
#include "turboquant/io/case_dir.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;
namespace io = turboquant::io;

const char* const kCommands[] = {"info", "codebook", "encode", "decode", "validate", "inspect", "bench", "isas", "backends"};

// Exit `code`, one line on stderr starting with `prefix`, holding every fragment.
void expect_one_line(const Result& r, int code, const std::string& prefix, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, code) << r.err << r.out;
  EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  for (const std::string& f : fragments)
    EXPECT_NE(r.err.find(f), std::string::npos) << "missing \"" << f << "\": " << r.err;
}

// No byte of stderr is a control character (but the final newline) or outside ASCII.
void expect_printable(const Result& r) {
  for (std::size_t i = 0; i + 1 < r.err.size(); ++i) {
    const auto c = static_cast<unsigned char>(r.err[i]);
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " at " << i << " of: " << r.err;
  }
}

fs::path copy_case(const std::string& name) {
  const fs::path dst = scratch() / name;
  fs::copy(kCases / name, dst, fs::copy_options::recursive);
  return dst;
}

// A minimal, valid 1x1 grayscale PNG.
std::string png_bytes() {
  static const unsigned char kPng[] = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x3a, 0x7e, 0x9b, 0x55, 0x00,
      0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01,
      0x48, 0xaf, 0xa4, 0x71, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
  return std::string(reinterpret_cast<const char*>(kPng), sizeof kPng);
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Usage, UnknownCommandsAreNamedWithASuggestion) {
  const struct {
    const char* typed;
    const char* meant;
  } kTypos[] = {{"decod", "decode"},    {"dcode", "decode"}, {"valdate", "validate"},
                {"inpsect", "inspect"}, {"inf", "info"},     {"codbook", "codebook"},
                {"bnech", "bench"},     {"enc", "encode"},   {"Decode", "decode"}};
  for (const auto& t : kTypos) {
    SCOPED_TRACE(t.typed);
    const Result r = tq(std::string(t.typed) + " " + q(kCases / "s01_4bit_nc_d128_bs16_gqa4"));
    expect_one_line(r, 2, "tq: ",
                    {std::string("unknown command '") + t.typed + "'", std::string("did you mean '") + t.meant + "'?"});
  }
  const Result far = tq("frobnicate");
  expect_one_line(far, 2, "tq: ", {"unknown command 'frobnicate'"});
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
  for (const char* name : kCommands) EXPECT_NE(far.err.find(name), std::string::npos) << name << ": " << far.err;

  expect_one_line(tq("--bogus"), 2, "tq: ", {"unknown option '--bogus'", "a command comes first"});
  expect_one_line(tq("-x validate"), 2, "tq: ", {"unknown option '-x'"});
  expect_one_line(tq(""), 2, "tq: ", {"no command given", "decode"});
  expect_one_line(tq("''"), 2, "tq: ", {"unknown command ''"});
  // The real names still work, and help still exits 0.
  EXPECT_EQ(tq("isas").exit_code, 0);
  EXPECT_EQ(tq("--help").exit_code, 0);
  EXPECT_EQ(tq("-h").exit_code, 0);
}

TEST(Usage, InfoRejectsOutOfRangeOptionValues) {
  const std::string base = "info --preset 4bit_nc --head-dim 128";  // block_size 16, 1 KV head
  expect_bad_input(tq(base + " --block -1"), "info", {"--block", "-1", ">= 0"});
  expect_bad_input(tq(base + " --block -7"), "info", {"--block", "-7"});
  expect_bad_input(tq(base + " --slot -1"), "info", {"--slot", "-1", "outside [0, 16)"});
  expect_bad_input(tq(base + " --slot 16"), "info", {"--slot", "16", "outside [0, 16)"});
  expect_bad_input(tq(base + " --slot 0 --head 1"), "info", {"--head", "1", "outside [0, 1)"});
  expect_bad_input(tq(base + " --slot 0 --head -1"), "info", {"--head", "-1"});
  expect_bad_input(tq(base + " --head 0"), "info", {"--head", "--slot"});  // --head alone would be ignored
  expect_bad_input(tq(base + " --block abc"), "info", {"--block", "abc"});

  // The last block whose start fits in int64, and the first that does not
  // (before: block * block_bytes overflowed and printed a negative offset).
  const json j = tq(base + " --json").parsed();
  const std::int64_t block_bytes = j["block_bytes"].get<std::int64_t>();
  const std::int64_t last = std::numeric_limits<std::int64_t>::max() / block_bytes;
  const Result ok = tq(base + " --block " + std::to_string(last) + " --json");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const json at = ok.parsed()["block_offset"];
  EXPECT_EQ(at["block"].get<std::int64_t>(), last);
  std::int64_t offset = 0, next = 0;
  ASSERT_FALSE(__builtin_mul_overflow(last, block_bytes, &offset));
  EXPECT_EQ(at["offset"].get<std::int64_t>(), offset);
  EXPECT_TRUE(__builtin_mul_overflow(last + 1, block_bytes, &next));  // the next block's start does not fit
  expect_bad_input(tq(base + " --block " + std::to_string(last + 1)), "info",
                   {"--block", std::to_string(last + 1), "2^63"});
  expect_bad_input(tq(base + " --block 99999999999999999999"), "info", {"--block", "99999999999999999999"});

  // Given and in range: shown.
  const json rec = tq(base + " --kv-heads 2 --slot 15 --head 1 --block 3 --json").parsed();
  EXPECT_EQ(rec["record"]["slot"], 15);
  EXPECT_EQ(rec["record"]["head"], 1);
  EXPECT_EQ(rec["block_offset"]["offset"].get<std::int64_t>(), 3 * rec["block_bytes"].get<std::int64_t>());
}

// CLI11 alone clamps an out-of-range 64-bit value to its limit, wraps a
// negative unsigned one and reads a leading 0 as octal: each would run with a
// number the user did not type.
TEST(Usage, IntegerOptionsTakeExactlyTheDecimalNumberTyped) {
  const std::string base = "info --preset 4bit_nc --head-dim 128";
  expect_bad_input(tq(base + " --block 99999999999999999999"), "info",
                   {"--block", "99999999999999999999 is outside [-9223372036854775808, 9223372036854775807]"});
  expect_bad_input(tq(base + " --block-size 4294967312"), "info",
                   {"--block-size", "4294967312 is outside [-2147483648, 2147483647]"});
  expect_bad_input(tq(base + " --kv-heads 0x10"), "info", {"--kv-heads", "0x10 is not a decimal integer"});
  expect_bad_input(tq(base + " --kv-heads 2.5"), "info", {"--kv-heads", "2.5 is not a decimal integer"});
  expect_bad_input(tq(base + " --kv-heads ' 2'"), "info", {"--kv-heads"});
  expect_bad_input(tq("bench --seed -1"), "bench", {"--seed", "-1 is not a non-negative integer"});
  expect_bad_input(tq("bench --seed 18446744073709551616"), "bench", {"--seed", "18446744073709551616 is outside"});
  expect_bad_input(tq("bench --threads 99999999999"), "bench", {"--threads", "99999999999 is outside"});
  expect_bad_input(tq("codebook --bits 4 --head-dim 1e3"), "codebook", {"--head-dim", "1e3"});
  const std::string c = q(kCases / "s01_4bit_nc_d128_bs16_gqa4");
  expect_bad_input(tq("decode " + c + " --out " + q(scratch() / "o.npy") + " --splits -0x1"), "decode",
                   {"--splits", "-0x1"});
  // 010 is ten, +4 is four.
  const json j = tq(base + " --block-size 010 --kv-heads +4 --json").parsed();
  EXPECT_EQ(j["block_size"], 10);
  EXPECT_EQ(j["kv_heads"], 4);
}

TEST(Usage, EmptyPathsNameTheirOption) {
  const std::string c = q(kCases / "s01_4bit_nc_d128_bs16_gqa4"), out = q(scratch() / "o.npy");
  expect_bad_input(tq("decode " + c + " --out ''"), "decode", {"--out", "an empty path"});
  expect_bad_input(tq("decode " + c + " --out " + out + " --lse ''"), "decode", {"--lse", "an empty path"});
  expect_bad_input(tq("decode '' --out " + out), "decode", {"CASE", "an empty path"});
  expect_bad_input(tq("encode " + c + " --out ''"), "encode", {"--out", "an empty path"});
  expect_bad_input(tq("validate " + c + " --output ''"), "validate", {"--output", "an empty path"});
  expect_bad_input(tq("validate ''"), "validate", {"CASE", "an empty path"});
  expect_bad_input(tq("inspect ''"), "inspect", {"CASE", "an empty path"});
  EXPECT_FALSE(fs::exists(scratch() / "o.npy"));
}

TEST(WrongFiles, PngAndTextFilesWhereNpyOrJsonOrACaseIsExpected) {
  const fs::path dir = copy_case("s01_4bit_nc_d128_bs16_gqa4");
  const fs::path png = dir.parent_path() / "picture.png";
  write_file(png, png_bytes());
  expect_bad_input(tq("validate " + q(png)), "validate", {"picture.png", "not a directory"});
  expect_bad_input(tq("validate " + q(dir) + " --output " + q(png)), "validate",
                   {"picture.png", "bad magic", "89 50 4e 47", "not a .npy file"});

  // A PNG saved as query.npy; a text file renamed .npy.
  write_file(dir / "query.npy", png_bytes());
  expect_bad_input(tq("decode " + q(dir) + " --out " + q(dir / "o.npy")), "decode", {"query.npy", "bad magic"});
  fs::copy_file(kCases / "s01_4bit_nc_d128_bs16_gqa4" / "query.npy", dir / "query.npy",
                fs::copy_options::overwrite_existing);
  write_file(dir / "seq_lens.npy", "1, 37, 300\n");
  expect_bad_input(tq("inspect " + q(dir)), "inspect", {"seq_lens.npy", "bad magic", "not a .npy file"});
  fs::copy_file(kCases / "s01_4bit_nc_d128_bs16_gqa4" / "seq_lens.npy", dir / "seq_lens.npy",
                fs::copy_options::overwrite_existing);

  // A PNG as meta.json: the parser quotes the byte it stopped at (0x89); the
  // line shows it escaped, never as a raw byte.
  write_file(dir / "meta.json", png_bytes());
  const Result r = tq("inspect " + q(dir));
  expect_bad_input(r, "inspect", {"meta.json", "invalid JSON", "\\x89"});
  expect_printable(r);
}

TEST(WrongFiles, ControlBytesInArgumentsAreEscaped) {
  const std::string c = q(kCases / "s01_4bit_nc_d128_bs16_gqa4");
  const Result r = tq("decode " + c + " --out \"$(printf 'no/such\\033[31mdir\\001/o.npy')\"");
  expect_bad_input(r, "decode", {"no/such\\x1b[31mdir\\x01/o.npy", "cannot open for writing"});
  expect_printable(r);
  // A C1 control (U+009B, CSI) written as UTF-8 is escaped byte by byte.
  const Result c1 = tq("decode " + c + " --out 'no/such/x\xc2\x9b" "31m/o.npy'");
  expect_bad_input(c1, "decode", {"no/such/x\\xc2\\x9b31m/o.npy"});
  expect_printable(c1);
  // Valid UTF-8 stays as it is.
  const Result u = tq("decode " + c + " --out 'no/such/d\xc3\xa9j\xc3\xa0/o.npy'");
  EXPECT_NE(u.err.find("no/such/d\xc3\xa9j\xc3\xa0/o.npy"), std::string::npos) << u.err;
}

// Sets the two bytes of the fp16 metadata field `field` of (block, slot, head) in the case's kv_cache.npy.
void poke_meta(const fs::path& dir, std::int64_t block, int slot, int head, turboquant::MetaField field,
               std::uint16_t bits) {
  io::CaseDir c;
  ASSERT_TRUE(io::load_case(dir.string(), io::CaseLoadOptions::decode(), &c).ok());
  io::NpyArray cache;
  ASSERT_TRUE(io::read_npy((dir / "kv_cache.npy").string(), &cache).ok());
  const std::int64_t at = c.layout.block_base(block) + c.layout.meta_field_offset(slot, head, field);
  ASSERT_LE(static_cast<std::size_t>(at + 2), cache.data.size());
  std::memcpy(cache.data.data() + at, &bits, 2);
  ASSERT_TRUE(io::write_npy((dir / "kv_cache.npy").string(), cache).ok());
}

std::int32_t first_block_of_sequence(const fs::path& dir, int b) {
  io::CaseDir c;
  EXPECT_TRUE(io::load_case(dir.string(), io::CaseLoadOptions::decode(), &c).ok());
  return c.block_table.values[static_cast<std::size_t>(b * c.max_blocks_per_seq)];
}

TEST(Inspect, NonFiniteMetadataInReferencedSlotsFails) {
  const fs::path dir = copy_case("s01_4bit_nc_d128_bs16_gqa4");
  ASSERT_EQ(tq("inspect " + q(dir)).exit_code, 0);  // the clean case passes
  const std::int32_t blk = first_block_of_sequence(dir, 1);
  poke_meta(dir, blk, 3, 1, turboquant::MetaField::kValueScale, 0x7e00);  // fp16 NaN
  const std::string where = "block " + std::to_string(blk) + " slot 3 head 1 value scale = nan";

  const Result text = tq("inspect " + q(dir));
  expect_one_line(text, 1, "tq inspect: ", {"kv_cache.npy", "1 non-finite metadata values", where});
  EXPECT_NE(text.out.find("non-finite metadata         1 (first: " + where + ")"), std::string::npos) << text.out;

  const Result js = tq("inspect " + q(dir) + " --json");
  expect_one_line(js, 1, "tq inspect: ", {"kv_cache.npy", where});
  EXPECT_EQ(js.parsed()["non_finite_metadata"].get<int>(), 1);

  // +inf in a key norm counts too.
  poke_meta(dir, blk, 4, 0, turboquant::MetaField::kKeyNorm, 0x7c00);
  expect_one_line(tq("inspect " + q(dir)), 1, "tq inspect: ", {"2 non-finite metadata values"});
}

TEST(Inspect, NonFiniteBytesOutsideReferencedSlotsOnlyReport) {
  const fs::path dir = copy_case("s01_4bit_nc_d128_bs16_gqa4");
  const json before = tq("inspect " + q(dir) + " --json").parsed();
  ASSERT_FALSE(before["unreferenced_blocks"].empty());
  poke_meta(dir, before["unreferenced_blocks"][0].get<std::int64_t>(), 0, 0, turboquant::MetaField::kValueScale,
            0x7e00);
  const Result r = tq("inspect " + q(dir) + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.parsed()["non_finite_metadata"].get<int>(), 0);
  EXPECT_EQ(r.parsed()["nonzero_bytes_outside_referenced_slots"].get<int>(), 1);
}

TEST(Inspect, NanFp8KeysFail) {
  const fs::path dir = copy_case("s02_k8v4_d128_bs16_gqa4");
  ASSERT_EQ(tq("inspect " + q(dir)).exit_code, 0);
  io::CaseDir c;
  ASSERT_TRUE(io::load_case(dir.string(), io::CaseLoadOptions::decode(), &c).ok());
  io::NpyArray cache;
  ASSERT_TRUE(io::read_npy((dir / "kv_cache.npy").string(), &cache).ok());
  const std::int32_t blk = first_block_of_sequence(dir, 0);
  cache.data[static_cast<std::size_t>(c.layout.block_base(blk) + c.layout.key_data_offset(0, 0) + 5)] =
      0x7f;  // e4m3fn NaN
  ASSERT_TRUE(io::write_npy((dir / "kv_cache.npy").string(), cache).ok());
  expect_one_line(tq("inspect " + q(dir)), 1, "tq inspect: ",
                  {"kv_cache.npy", "block " + std::to_string(blk) + " slot 0 head 0 fp8 key dim 5 = nan"});
}

}  // namespace
