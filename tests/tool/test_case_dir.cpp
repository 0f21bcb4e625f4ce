// Case directories: the five real vLLM cases load with the right sizes, and
// broken copies fail with a message naming the file and the bad value.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "temp_dir.hpp"
#include "turboquant/io/case_dir.hpp"
#include "turboquant/io/npy.hpp"

namespace turboquant::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const fs::path kCases = fs::path(TQ_TEST_DATA_DIR) / "vllm-soa";

struct Expected {
  const char* name;
  Preset preset;
  int head_dim, block_size, hk, hq;
  std::int64_t batch, tokens, blocks, max_blocks, slot_bytes, centroids;
  std::vector<std::int32_t> seq_lens;
};

// From the README table and numpy's view of the files.
const std::vector<Expected> kExpected = {
    {"s01_4bit_nc_d128_bs16_gqa4", Preset::k4BitNc, 128, 16, 2, 8, 3, 338, 26, 20, 134, 16, {1, 37, 300}},
    {"s02_k8v4_d128_bs16_gqa4", Preset::kK8V4, 128, 16, 2, 8, 3, 338, 26, 20, 196, 16, {1, 37, 300}},
    {"s03_k3v4_nc_d64_bs32_mha", Preset::kK3V4Nc, 64, 32, 4, 4, 2, 146, 9, 6, 62, 8, {17, 129}},
    {"s04_3bit_nc_d256_bs16_gqa8", Preset::k3BitNc, 256, 16, 2, 16, 2, 613, 43, 34, 198, 8, {100, 513}},
    {"s05_4bit_nc_d128_bs64_sharp", Preset::k4BitNc, 128, 64, 4, 16, 2, 765, 16, 12, 134, 16, {700, 65}},
};

TEST(CaseDir, AllCasesLoad) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    CaseDir c;
    const Status s = load_case((kCases / e.name).string(), CaseLoadOptions::all_required(), &c);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(c.preset, e.preset);
    EXPECT_EQ(c.preset_name, preset_name(e.preset));
    EXPECT_EQ(c.head_dim(), e.head_dim);
    EXPECT_EQ(c.block_size(), e.block_size);
    EXPECT_EQ(c.num_kv_heads(), e.hk);
    EXPECT_EQ(c.num_q_heads, e.hq);
    EXPECT_EQ(c.num_kv_splits, 32);
    EXPECT_NEAR(c.scale, 1.0 / std::sqrt(e.head_dim), 1e-15);
    EXPECT_FALSE(c.source.empty());
    EXPECT_EQ(c.batch, e.batch);
    EXPECT_EQ(c.num_tokens, e.tokens);
    EXPECT_EQ(c.num_blocks, e.blocks);
    EXPECT_EQ(c.max_blocks_per_seq, e.max_blocks);
    EXPECT_EQ(c.kv_cache.dim(3), e.slot_bytes);
    EXPECT_EQ(static_cast<std::int64_t>(c.kv_cache.size()), c.layout.block_bytes() * e.blocks);
    EXPECT_EQ(static_cast<std::int64_t>(c.centroids.size()), e.centroids);
    EXPECT_EQ(c.seq_lens.values, e.seq_lens);
    EXPECT_EQ(c.query.size(), static_cast<std::size_t>(e.batch * e.hq * e.head_dim));
    EXPECT_EQ(c.keys.shape, c.values.shape);
    EXPECT_EQ(c.slot_mapping.size(), static_cast<std::size_t>(e.tokens));
    EXPECT_EQ(c.expected_lse.shape, (std::vector<std::int64_t>{e.batch, e.hq}));
    // The README: expected_out matches the float64 oracle to ~1e-7, so both
    // files were read element for element in the same order.
    double num = 0, den = 0;
    for (std::size_t i = 0; i < c.expected_out.size(); ++i) {
      const double r = c.reference_out_f64.values[i];
      num += (c.expected_out.values[i] - r) * (c.expected_out.values[i] - r);
      den += r * r;
    }
    EXPECT_LT(std::sqrt(num / den), 1e-6);
  }
}

TEST(CaseDir, OptionsChooseFiles) {
  const std::string dir = (kCases / kExpected[2].name).string();
  CaseDir c;
  ASSERT_TRUE(load_case(dir, CaseLoadOptions::meta_only(), &c).ok());
  EXPECT_FALSE(c.query.present);
  EXPECT_EQ(c.batch, -1);
  ASSERT_TRUE(load_case(dir, CaseLoadOptions::encode(), &c).ok());
  EXPECT_TRUE(c.keys.present && c.values.present && c.slot_mapping.present && c.kv_cache.present);
  EXPECT_FALSE(c.query.present || c.expected_out.present);
  ASSERT_TRUE(load_case(dir, CaseLoadOptions::decode(), &c).ok());
  EXPECT_TRUE(c.query.present && c.block_table.present && c.expected_out.present);
}

TEST(CaseDir, LoadsAnOutputByName) {
  CaseDir c;
  ASSERT_TRUE(load_case((kCases / kExpected[0].name).string(), CaseLoadOptions::decode(), &c).ok());
  CaseArray<float> out;
  ASSERT_TRUE(load_case_output(c, "vllm_v2_out", &out).ok());
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{3, 8, 128}));
  ASSERT_TRUE(load_case_output(c, c.file("expected_out.npy"), &out).ok());
  EXPECT_EQ(out.values, c.expected_out.values);
  Status s = load_case_output(c, "expected_lse.npy", &out);
  EXPECT_TRUE(s.message().find("expected_lse.npy: shape (3, 8) does not match [T, Hq, D]") != std::string::npos)
      << s.message();
  s = load_case_output(c, "nothing_here", &out);
  EXPECT_TRUE(s.message().find("nothing_here: no such file") == 0) << s.message();
}

// A writable copy of a case (the originals are read-only).
class BrokenCase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (tmp_.path() / "case").string();
    fs::remove_all(dir_);  // a fresh copy: files a previous damage added go too
    fs::create_directory(dir_);
    for (const auto& f : fs::directory_iterator(kCases / kExpected[2].name)) {  // s03: Hq = Hk = 4, D = 64, B = 2
      const fs::path to = fs::path(dir_) / f.path().filename();
      fs::copy_file(f.path(), to, fs::copy_options::overwrite_existing);
      fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write);
    }
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  Status load(const CaseLoadOptions& o = CaseLoadOptions::all_required()) {
    CaseDir c;
    return load_case(dir_, o, &c);
  }
  void edit_meta(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json meta = nlohmann::json::parse(std::ifstream(file("meta.json")));
    edit(meta);
    std::ofstream(file("meta.json")) << meta.dump(1);
  }
  template <class T>
  void write(const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    ASSERT_TRUE(write_npy(file(name), make_npy<T>(std::move(shape), std::vector<T>(n))).ok());
  }
  // The load fails and the message contains `text`.
  void expect_error(const std::string& text, const CaseLoadOptions& o = CaseLoadOptions::all_required()) {
    const Status s = load(o);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }

  // A table of broken cases: each row damages a fresh copy, then the load
  // (with `o`) fails naming `text`.
  struct Breakage {
    std::function<void()> damage;
    std::string text;
  };
  void expect_errors(const std::vector<Breakage>& rows, const CaseLoadOptions& o = CaseLoadOptions::all_required()) {
    for (const Breakage& row : rows) {
      SetUp();
      row.damage();
      if (HasFatalFailure()) return;
      expect_error(row.text, o);
    }
  }
  // Damage: `name` replaced by a zero-filled array of `shape`.
  template <class T>
  std::function<void()> shaped(const std::string& name, std::vector<std::int64_t> shape) {
    return [this, name, shape] { write<T>(name, shape); };
  }
  // Damage: meta.json edited by `edit`, or replaced by `text`.
  std::function<void()> meta(const std::function<void(nlohmann::json&)>& edit) {
    return [this, edit] { edit_meta(edit); };
  }
  std::function<void()> meta_text(const std::string& text) {
    return [this, text] { std::ofstream(file("meta.json")) << text; };
  }

  TempDir tmp_;
  std::string dir_;
};

TEST_F(BrokenCase, CopyLoads) { ASSERT_TRUE(load().ok()); }

TEST_F(BrokenCase, MissingFiles) {
  fs::remove(file("query.npy"));
  expect_error(file("query.npy") + ": required file is missing", CaseLoadOptions::decode());
  EXPECT_TRUE(load(CaseLoadOptions::encode()).ok());
  fs::remove(file("expected_lse.npy"));  // optional for a decode
  CaseDir c;
  ASSERT_TRUE(load_case(dir_, CaseLoadOptions::meta_only(), &c).ok());
  fs::remove(file("meta.json"));
  expect_error(file("meta.json") + ": no such file", CaseLoadOptions::meta_only());
  CaseDir none;
  const Status s = load_case(file("nope"), CaseLoadOptions::meta_only(), &none);
  EXPECT_EQ(s.message(), file("nope") + ": no such case directory");
}

TEST_F(BrokenCase, OptionalFileMayBeAbsent) {
  fs::remove(file("expected_lse.npy"));
  CaseDir c;
  ASSERT_TRUE(load_case(dir_, CaseLoadOptions::decode(), &c).ok());
  EXPECT_FALSE(c.expected_lse.present);
  EXPECT_TRUE(c.expected_out.present);
}

TEST_F(BrokenCase, WrongDtypes) {
  expect_errors({
      {shaped<std::int32_t>("query.npy", {2, 4, 64}), file("query.npy") + ": dtype int32 cannot be read as float32"},
      {shaped<std::int32_t>("kv_cache.npy", {9, 32, 4, 62}), file("kv_cache.npy") + ": dtype int32, expected uint8"},
      {shaped<float>("reference_out_f64.npy", {2, 4, 64}),
       file("reference_out_f64.npy") + ": dtype float32, expected float64"},
      {shaped<float>("seq_lens.npy", {2}), file("seq_lens.npy") + ": dtype float32 cannot be read as int32"},
      {[this] {
         ASSERT_TRUE(write_npy(file("block_table.npy"),
                               make_npy<std::int64_t>({2, 1}, std::vector<std::int64_t>{0, std::int64_t{1} << 33}))
                         .ok());
       },
       file("block_table.npy") + ": element 1 = 8589934592 does not fit in int32"},
  });
}

TEST_F(BrokenCase, ShapesDisagreeingWithMeta) {
  expect_errors({
      {shaped<float>("query.npy", {2, 4, 32}),
       file("query.npy") + ": shape (2, 4, 32) does not match [B, Hq, D]: dim 2 (D) = 32, but head_dim = 64 in meta.json"},
      {shaped<float>("query.npy", {2, 8, 64}), "dim 1 (Hq) = 8, but num_q_heads = 4 in meta.json"},
      {shaped<float>("query.npy", {2, 256}),
       file("query.npy") + ": shape (2, 256) does not match [B, Hq, D]: 2 dimensions, expected 3"},
      {shaped<std::int32_t>("seq_lens.npy", {3}),
       file("seq_lens.npy") + ": shape (3,) does not match [B]: dim 0 (B) = 3, but query.npy has B = 2"},
      {shaped<float>("values.npy", {145, 4, 64}),
       file("values.npy") + ": shape (145, 4, 64) does not match [N, Hk, D]: dim 0 (N) = 145, but keys.npy has N = 146"},
      {shaped<float>("keys.npy", {146, 2, 64}), "dim 1 (Hk) = 2, but num_kv_heads = 4 in meta.json"},
      {shaped<std::int32_t>("slot_mapping.npy", {147}), "slot_mapping.npy: shape (147,) does not match [N]"},
      {shaped<std::uint8_t>("kv_cache.npy", {9, 32, 4, 64}),
       file("kv_cache.npy") +
           ": shape (9, 32, 4, 64) does not match [num_blocks, block_size, Hk, slot_bytes]: "
           "dim 3 (slot_bytes) = 64, but turboquant_k3v4_nc at head_dim = 64 stores 62"},
      {shaped<std::uint8_t>("kv_cache.npy", {9, 16, 4, 62}), "dim 1 (block_size) = 16, but block_size = 32 in meta.json"},
      {shaped<float>("centroids.npy", {16}),
       file("centroids.npy") + ": shape (16,), expected (8,) for turboquant_k3v4_nc (key_bits = 3)"},
      {shaped<float>("expected_lse.npy", {2, 4, 1}), "expected_lse.npy: shape (2, 4, 1) does not match [B, Hq]"},
  });
}

TEST_F(BrokenCase, BadMeta) {
  using nlohmann::json;
  expect_errors(
      {
          {meta([](json& m) { m["preset"] = "turboquant_5bit"; }),
           file("meta.json") +
               ": preset = \"turboquant_5bit\" is not one of turboquant_k8v4, turboquant_4bit_nc, "
               "turboquant_k3v4_nc, turboquant_3bit_nc"},
          {meta_text("{\"preset\": \"turboquant_k3v4_nc\", \"head_dim\": 64,,}"), file("meta.json") + ": invalid JSON: "},
          {meta_text("[1, 2]"), "meta.json: expected a JSON object, found array"},
          {meta([](json& m) { m.erase("head_dim"); }), "meta.json: missing key \"head_dim\""},
          {meta([](json& m) { m["block_size"] = "32"; }), "meta.json: block_size = \"32\" must be an integer"},
          {meta([](json& m) { m["num_kv_heads"] = 4.5; }), "meta.json: num_kv_heads = 4.5 must be an integer"},
          {meta([](json& m) { m["head_dim"] = 10000000000LL; }),
           "meta.json: head_dim = 10000000000 does not fit in a 32-bit int"},
          {meta([](json& m) { m["head_dim"] = 96; }),  // Lloyd-Max keys need a power of two
           "meta.json: format {key_bits = 3, value_bits = 4, head_dim = 96, norm_correction = on, layout = soa, "
           "fp8_format = e4m3}: Lloyd-Max keys need a power-of-two head_dim"},
          // Keys and values this reader does not know are errors, never ignored.
          {meta([](json& m) { m["comment"] = "x"; }), "meta.json: unknown key \"comment\" (known: preset"},
          {meta([](json& m) { m["layout"] = "paged"; }), "meta.json: layout = \"paged\" is not one of \"soa\", \"aos\""},
          {meta([](json& m) { m["layout"] = 1; }), "meta.json: layout = 1 is not one of"},
          {meta([](json& m) { m["fp8_format"] = "e5m2"; }), "meta.json: fp8_format = \"e5m2\" is not one of"},
          {meta([](json& m) { m["fp8_format"] = "e4b15"; }),
           "meta.json: fp8_format = \"e4b15\": only turboquant_k8v4 has FP8 keys, not turboquant_k3v4_nc"},
          {meta([](json& m) { m["sliding_window"] = 64; }),
           "meta.json: sliding_window = 64: sliding-window decode is not supported yet"},
          {meta([](json& m) { m["sliding_window"] = 0; }),
           "meta.json: sliding_window = 0 must be >= 1 (leave the key out for no window)"},
          {meta([](json& m) { m["sliding_window"] = "64"; }), "meta.json: sliding_window = \"64\" must be an integer"},
          {meta([](json& m) { m["block_size"] = 0; }), "block_size must be >= 1"},
          {meta([](json& m) { m["num_q_heads"] = 6; }),
           "meta.json: num_q_heads = 6 must be a positive multiple of num_kv_heads = 4"},
          {meta([](json& m) { m["scale"] = "0.125"; }), "meta.json: scale = \"0.125\" must be a number"},
          {meta([](json& m) { m["num_kv_splits"] = 0; }), "meta.json: num_kv_splits = 0 must be >= 1"},
      },
      CaseLoadOptions::meta_only());
}

TEST_F(BrokenCase, OptionalMetaKeys) {
  edit_meta([](nlohmann::json& m) {
    m.erase("num_kv_splits");
    m.erase("source");
    m["preset"] = "k3v4_nc";  // the short name is accepted too
  });
  CaseDir c;
  ASSERT_TRUE(load_case(dir_, CaseLoadOptions::all_required(), &c).ok());
  EXPECT_EQ(c.num_kv_splits, 32);
  EXPECT_TRUE(c.source.empty());
  EXPECT_EQ(c.preset, Preset::kK3V4Nc);
  EXPECT_EQ(c.format.layout, LayoutKind::kSoA);  // absent layout: SoA (the 2026-11-29 cases)
}

TEST_F(BrokenCase, LayoutKeys) {
  edit_meta([](nlohmann::json& m) { m["layout"] = "aos"; });
  CaseDir c;
  ASSERT_TRUE(load_case(dir_, CaseLoadOptions::meta_only(), &c).ok());
  EXPECT_EQ(c.format.layout, LayoutKind::kAoS);
  EXPECT_EQ(c.layout.format.layout, LayoutKind::kAoS);
}

// A caller that does not honour them (tq, the Python package) gets an error,
// never rows decoded as one token per sequence.
TEST_F(BrokenCase, MultiTokenFilesAreRefusedNotIgnored) {
  write<std::int32_t>("query_start_loc.npy", {3});
  expect_error("query_start_loc.npy: multi-token queries and attention sinks are not supported yet");
  SetUp();
  write<float>("sinks.npy", {4});
  expect_error("sinks.npy: multi-token queries and attention sinks are not supported yet",
               CaseLoadOptions::meta_only());
}

CaseLoadOptions with_rows(CaseLoadOptions o = CaseLoadOptions::all_required()) {
  o.rows_sinks_window = true;
  return o;
}

// Opted in, query_start_loc.npy and sinks.npy are read whenever present, with
// the same shape checks as the other files.
TEST_F(BrokenCase, MultiTokenFilesAreChecked) {
  expect_errors(
      {
          {shaped<std::int32_t>("query_start_loc.npy", {2, 2}),
           "query_start_loc.npy: shape (2, 2) does not match [B+1]: expected one dimension of at least 1"},
          {shaped<std::int32_t>("query_start_loc.npy", {0}), "query_start_loc.npy: shape (0,) does not match [B+1]"},
          {shaped<std::int32_t>("query_start_loc.npy", {5}),
           "dim 0 (B) = 2, but query_start_loc.npy (B + 1 entries) has B = 4"},
          {shaped<float>("sinks.npy", {5}),
           "sinks.npy: shape (5,) does not match [Hq]: dim 0 (Hq) = 5, but num_q_heads = 4"},
          {shaped<double>("query_start_loc.npy", {3}), "query_start_loc.npy"},
      },
      with_rows());
  // Skipping the query does not skip them.
  SetUp();
  write<std::int32_t>("query_start_loc.npy", {2, 2});
  expect_error("query_start_loc.npy: shape (2, 2)", with_rows(CaseLoadOptions::meta_only()));
}

TEST_F(BrokenCase, MultiTokenFilesLoad) {
  // s03 has B = 2 query rows: as query_start_loc [0, 1, 2] (q_len 1 each), sinks and a window.
  ASSERT_TRUE(write_npy(file("query_start_loc.npy"), make_npy<std::int32_t>({3}, {0, 1, 2})).ok());
  ASSERT_TRUE(write_npy(file("sinks.npy"), make_npy<float>({4}, {-1.0f, 0.0f, 2.5f, 7.0f})).ok());
  edit_meta([](nlohmann::json& m) { m["sliding_window"] = 8; });
  CaseDir c;
  ASSERT_TRUE(load_case(dir_, with_rows(), &c).ok());
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.num_query_rows, 2);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_TRUE(c.multi_token_or_sinks_or_window());
  EXPECT_EQ(c.query_start_loc.values, (std::vector<std::int32_t>{0, 1, 2}));
  std::vector<float> out, lse;
  const DecodeArgs a = case_decode_args(c, nullptr, 32, &out, &lse);
  EXPECT_EQ(a.query_start_loc.data, c.query_start_loc.data());
  EXPECT_EQ(a.query_start_loc.bytes, 12u);
  EXPECT_EQ(a.num_query_rows, 2);
  EXPECT_EQ(a.sinks.data, c.sinks.data());
  EXPECT_EQ(a.sinks.bytes, 16u);
  EXPECT_EQ(a.sliding_window, 8);
  EXPECT_EQ(out.size(), 2u * 4 * 64);
  // A plain case sets none of them.
  CaseDir plain;
  ASSERT_TRUE(load_case((kCases / kExpected[2].name).string(), with_rows(), &plain).ok());
  EXPECT_FALSE(plain.multi_token_or_sinks_or_window());
  EXPECT_EQ(plain.num_query_rows, 2);
  const DecodeArgs p = case_decode_args(plain, nullptr, 32, &out, nullptr);
  EXPECT_FALSE(decode_uses_rows_sinks_or_window(p));
}

TEST_F(BrokenCase, CorruptArrayNamesTheFile) {
  auto bytes = test::read_bytes(file("keys.npy"));
  bytes.resize(bytes.size() - 100);
  test::write_bytes(file("keys.npy"), bytes);
  expect_error(file("keys.npy") +
               ": truncated: header says shape (146, 4, 64) float32 = 149504 bytes of data, "
               "file has 149404");
  EXPECT_TRUE(load(CaseLoadOptions::meta_only()).ok());
}

}  // namespace
}  // namespace turboquant::io
