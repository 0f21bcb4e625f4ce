// tq on broken copies of a vLLM case and on bad command lines: every one must
// exit 2 (3 for a backend this build cannot run) with one line on stderr that
// names the file or argument and the bad value, and never crash.
#include <cmath>
#include <limits>

#include "tq_runner.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;
namespace io = turboquant::io;

const char* kSmall = "s01_4bit_nc_d128_bs16_gqa4";  // 4bit_nc, D 128, bs 16, Hk 2, Hq 8, seq_lens 1, 37, 300

// A fresh copy of the small case in this test's scratch directory.
fs::path copy_case() {
  const fs::path dst = scratch() / kSmall;
  fs::copy(kCases / kSmall, dst, fs::copy_options::recursive);
  return dst;
}

io::NpyArray read(const fs::path& p) {
  io::NpyArray a;
  EXPECT_TRUE(io::read_npy(p.string(), &a).ok()) << p;
  return a;
}

void write(const fs::path& p, const io::NpyArray& a) { ASSERT_TRUE(io::write_npy(p.string(), a).ok()) << p; }

template <class T>
void set_element(const fs::path& p, std::size_t index, T value) {
  io::NpyArray a = read(p);
  ASSERT_LT((index + 1) * sizeof(T), a.data.size() + 1);
  std::memcpy(a.data.data() + index * sizeof(T), &value, sizeof(T));
  write(p, a);
}

void edit_meta(const fs::path& dir, const std::string& key, const json& value) {
  std::ifstream in(dir / "meta.json");
  json meta = json::parse(in);
  in.close();
  meta[key] = value;
  std::ofstream(dir / "meta.json") << meta.dump(1);
}

// The commands that read a case's decode inputs.
void expect_all_reject(const fs::path& dir, const std::vector<std::string>& fragments,
                       std::vector<std::string> commands = {"validate", "decode", "inspect"}) {
  for (const std::string& cmd : commands) {
    SCOPED_TRACE(cmd);
    const std::string extra = cmd == "decode" ? " --out " + q(dir.parent_path() / "out.npy") : "";
    expect_bad_input(tq(cmd + " " + q(dir) + extra), cmd, fragments);
  }
}

TEST(BrokenCase, TruncatedNpy) {
  const fs::path dir = copy_case();
  fs::resize_file(dir / "kv_cache.npy", fs::file_size(dir / "kv_cache.npy") - 1000);
  expect_all_reject(dir, {"kv_cache.npy", "truncated"}, {"validate", "decode", "inspect", "encode"});
}

TEST(BrokenCase, CorruptNpy) {
  const fs::path dir = copy_case();
  std::string bytes = slurp(dir / "query.npy");
  bytes.replace(0, 6, "GARBAG");
  std::ofstream(dir / "query.npy", std::ios::binary) << bytes;
  expect_all_reject(dir, {"query.npy", "magic"}, {"validate", "decode"});

  // A header that is not a dict literal.
  bytes = slurp(kCases / kSmall / "seq_lens.npy");
  bytes.replace(bytes.find("'shape'"), 7, "'shope'");
  std::ofstream(dir / "seq_lens.npy", std::ios::binary) << bytes;
  fs::copy_file(kCases / kSmall / "query.npy", dir / "query.npy", fs::copy_options::overwrite_existing);
  expect_all_reject(dir, {"seq_lens.npy"});
}

TEST(BrokenCase, WrongDtype) {
  const fs::path dir = copy_case();
  const io::NpyArray table = read(dir / "block_table.npy");
  std::vector<std::int32_t> ints(table.data.size() / 4);
  std::memcpy(ints.data(), table.data.data(), table.data.size());
  write(dir / "block_table.npy", io::make_npy<float>(table.shape, std::vector<float>(ints.begin(), ints.end())));
  expect_all_reject(dir, {"block_table.npy", "float32"});

  fs::copy_file(kCases / kSmall / "block_table.npy", dir / "block_table.npy", fs::copy_options::overwrite_existing);
  const io::NpyArray cache = read(dir / "kv_cache.npy");
  write(dir / "kv_cache.npy", io::make_npy<std::int32_t>({static_cast<std::int64_t>(cache.data.size())},
                                                         std::vector<std::int32_t>(cache.data.size())));
  expect_all_reject(dir, {"kv_cache.npy", "int32", "uint8"});
}

TEST(BrokenCase, ShapeDisagreesWithMeta) {
  const fs::path dir = copy_case();
  edit_meta(dir, "num_q_heads", 4);
  expect_all_reject(dir, {"query.npy", "num_q_heads = 4"}, {"validate", "decode"});
  edit_meta(dir, "num_q_heads", 8);
  edit_meta(dir, "block_size", 32);
  expect_all_reject(dir, {"kv_cache.npy", "block_size = 32"});
}

TEST(BrokenCase, BlockTableEntryOutOfRange) {
  const fs::path dir = copy_case();
  const io::NpyArray table = read(dir / "block_table.npy");
  set_element<std::int32_t>(dir / "block_table.npy", static_cast<std::size_t>(table.shape[1]), 999);  // [1][0]
  expect_all_reject(dir, {"block_table", "block_table[1][0] = 999", "outside [0, 26)"});
  set_element<std::int32_t>(dir / "block_table.npy", static_cast<std::size_t>(table.shape[1]), -3);
  expect_all_reject(dir, {"block_table[1][0] = -3"});
}

TEST(BrokenCase, SeqLenBeyondItsBlocks) {
  const fs::path dir = copy_case();
  set_element<std::int32_t>(dir / "seq_lens.npy", 2, 100000);
  expect_all_reject(dir, {"seq_lens", "seq_lens[2] = 100000", "block_table has 20 per row"});
  set_element<std::int32_t>(dir / "seq_lens.npy", 2, -1);
  expect_all_reject(dir, {"seq_lens[2] = -1"});
}

TEST(BrokenCase, MissingRequiredFile) {
  const fs::path dir = copy_case();
  fs::remove(dir / "kv_cache.npy");
  expect_all_reject(dir, {"kv_cache.npy", "missing"});
  fs::remove(dir / "keys.npy");
  expect_bad_input(tq("encode " + q(dir)), "encode", {"keys.npy", "missing"});
  fs::remove(dir / "meta.json");
  expect_all_reject(dir, {"meta.json", "no such file"});
}

TEST(BrokenCase, NonFiniteQuery) {
  const fs::path dir = copy_case();
  set_element<float>(dir / "query.npy", 0, std::numeric_limits<float>::quiet_NaN());
  expect_all_reject(dir, {"query.npy", "query[0][0][0] = nan", "not finite"}, {"validate", "decode"});
  fs::copy_file(kCases / kSmall / "query.npy", dir / "query.npy", fs::copy_options::overwrite_existing);
  set_element<float>(dir / "query.npy", (1 * 8 + 2) * 128 + 3, std::numeric_limits<float>::infinity());
  expect_all_reject(dir, {"query.npy", "query[1][2][3] = inf"}, {"validate", "decode"});
}

TEST(BrokenCase, UnknownPreset) {
  const fs::path dir = copy_case();
  edit_meta(dir, "preset", "turboquant_5bit");
  expect_all_reject(dir, {"meta.json", "turboquant_5bit"}, {"validate", "decode", "inspect", "encode"});
  expect_bad_input(tq("info --preset 5bit --head-dim 128"), "info", {"--preset", "5bit"});
  expect_bad_input(tq("bench --preset 5bit"), "bench", {"--preset", "5bit"});
}

TEST(BrokenCase, InspectReportsStrayBytesAndBadMetadata) {
  const fs::path dir = copy_case();
  const json before = tq("inspect " + q(dir) + " --json").parsed();
  ASSERT_FALSE(before["unreferenced_blocks"].empty());
  const std::int64_t spare = before["unreferenced_blocks"][0].get<std::int64_t>();
  const std::int64_t block_bytes = before["block_bytes"].get<std::int64_t>();
  const io::NpyArray table = read(dir / "block_table.npy");
  std::int32_t first;
  std::memcpy(&first, table.data.data(), 4);  // block_table[0][0]: slot 0 of sequence 0
  io::NpyArray cache = read(dir / "kv_cache.npy");
  cache.data[static_cast<std::size_t>(spare * block_bytes + 7)] = 0xab;
  const std::size_t norm =
      static_cast<std::size_t>(first * block_bytes + 16 * 2 * 128);  // meta offset: key norm (0, 0)
  cache.data[norm] = 0x00, cache.data[norm + 1] = 0x7e;              // fp16 NaN
  write(dir / "kv_cache.npy", cache);
  const Result r = tq("inspect " + q(dir) + " --json");
  // The NaN key norm in a referenced slot fails the inspection (exit 1, one
  // line); the report is still printed.
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("tq inspect: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("kv_cache.npy: 1 non-finite metadata values"), std::string::npos) << r.err;
  const json j = r.parsed();
  EXPECT_EQ(j["nonzero_bytes_outside_referenced_slots"].get<int>(), 1);
  EXPECT_EQ(j["non_finite_metadata"].get<int>(), 1);
}

TEST(BrokenCase, EncodeWithoutKvCacheSizesTheCacheItself) {
  const fs::path dir = copy_case();
  fs::remove(dir / "kv_cache.npy");
  const Result r = tq("encode " + q(dir) + " --out " + q(dir / "made.npy") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read(dir / "made.npy").shape, (std::vector<std::int64_t>{26, 16, 2, 134}));
}

TEST(Usage, BadCommandLines) {
  const std::string c = q(kCases / kSmall), out = q(scratch() / "x.npy");
  expect_bad_input(tq("validate " + c + " --bogus"), "validate", {"--bogus"});
  expect_bad_input(tq("validate"), "validate", {"CASE"});
  expect_bad_input(tq("validate /nonexistent/case"), "validate", {"/nonexistent/case", "no such case directory"});
  expect_bad_input(tq("validate " + c + " --rtol -1"), "validate", {"--rtol", "-1"});
  expect_bad_input(tq("validate " + c + " --output nothere.npy"), "validate", {"nothere.npy", "no such file"});
  expect_bad_input(tq("decode " + c), "decode", {"--out"});
  expect_bad_input(tq("decode " + c + " --out " + out + " --backend nope"), "decode", {"--backend", "nope"});
  expect_bad_input(tq("decode " + c + " --out " + out + " --splits 0"), "decode", {"--splits", "0"});
  expect_bad_input(tq("info --preset 4bit_nc --head-dim 96"), "info", {"head_dim = 96", "power-of-two"});
  expect_bad_input(tq("info --preset 4bit_nc --head-dim abc"), "info", {"--head-dim", "abc"});
  expect_bad_input(tq("codebook --bits 5 --head-dim 128"), "codebook", {"--bits", "5"});
  expect_bad_input(tq("bench --q-heads 6 --kv-heads 4"), "bench", {"--q-heads", "6"});
  expect_bad_input(tq("inspect"), "inspect", {"CASE"});
  const Result none = tq("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err.rfind("tq: ", 0), 0u) << none.err;
  EXPECT_EQ(tq("frobnicate").exit_code, 2);
  EXPECT_EQ(tq("--help").exit_code, 0);
  EXPECT_EQ(tq("validate --help").exit_code, 0);
}

TEST(Usage, UnavailableBackendExits3) {
  const fs::path dir = scratch();
  const std::string c = q(kCases / kSmall) + " --out " + q(dir / "out.npy");
  const Result isa = tq("decode " + c + " --backend cpu-ref --isa avx9000");
  EXPECT_EQ(isa.exit_code, 3) << isa.err;
  EXPECT_NE(isa.err.find("avx9000"), std::string::npos) << isa.err;
  for (const char* backend : {"cuda", "cuda-strict"}) {
    const Result r = tq("decode " + c + " --backend " + backend);
#ifdef TQ_TEST_TQ_HAS_CUDA
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.err;
#else
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(r.err.rfind("tq decode: backend " + std::string(backend) + ": not built with CUDA", 0), 0u) << r.err;
#endif
  }
}

TEST(Json, EveryCommandPrintsOneObject) {
  const fs::path dir = scratch();
  const std::string c = q(kCases / kSmall);
  const Result isas = tq("isas");
  ASSERT_EQ(isas.exit_code, 0);
  EXPECT_EQ(isas.out.rfind("scalar\n", 0), 0u) << isas.out;
  EXPECT_EQ(tq("isas --json").parsed()["isas"][0], "scalar");
  const json d = tq("decode " + c + " --out " + q(dir / "o.npy") + " --json").parsed();
  EXPECT_EQ(d["backend"], "cpu-ref");
  EXPECT_TRUE(tq("info --preset k8v4 --head-dim 64 --json").parsed().is_object());

  const Result b = tq("bench --batch 2 --seq-len 100 --q-heads 4 --kv-heads 2 --head-dim 64 --repeats 2 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json j = b.parsed();
  ASSERT_EQ(j["results"].size(), 4u);
  for (const json& r : j["results"]) {
    for (const char* key : {"preset", "backend", "isa", "threads", "batch", "seq_len", "q_heads", "kv_heads",
                            "head_dim", "encode_token_heads_per_s", "decode_ms", "decode_gbps", "probe_gbps",
                            "rel_l2_vs_f64_dequant", "rel_l2_vs_f64_original"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_LT(r["rel_l2_vs_f64_dequant"].get<double>(), 1e-5);
    EXPECT_GT(r["rel_l2_vs_f64_original"].get<double>(), 0.02);
    EXPECT_LT(r["rel_l2_vs_f64_original"].get<double>(), 0.6);
    EXPECT_GT(r["probe_gbps"].get<double>(), 0.0);
  }
}

}  // namespace
