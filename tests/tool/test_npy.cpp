// The .npy reader must accept every file numpy writes for our dtypes and turn
// every malformed one into a Status naming the file, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "temp_dir.hpp"
#include "turboquant/io/npy.hpp"

namespace turboquant::io {
namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;
namespace fs = std::filesystem;

// A file with the given header dict (padded to 64 like numpy) and data bytes.
std::vector<std::uint8_t> npy_file(const std::string& dict, std::size_t data_bytes, int major = 1) {
  const std::size_t pre = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<std::uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  for (std::size_t i = 0; i < pre - 8; ++i) f.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  f.insert(f.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) f.push_back(static_cast<std::uint8_t>(i * 7));
  return f;
}

std::string f4_dict(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

Status parse(const std::vector<std::uint8_t>& bytes, NpyArray* a = nullptr) {
  NpyArray scratch;
  return parse_npy(bytes, "mem.npy", a ? a : &scratch);
}

// Parses in memory and from a file; both must fail the same way, naming the file.
Status parse_both(const TempDir& dir, const std::vector<std::uint8_t>& bytes) {
  const std::string path = dir.file("bad.npy");
  write_bytes(path, bytes);
  NpyArray a;
  const Status from_file = read_npy(path, &a);
  const Status from_mem = parse(bytes);
  EXPECT_EQ(from_file.ok(), from_mem.ok());
  if (!from_file.ok()) {
    EXPECT_EQ(from_file.code(), from_mem.code()) << from_file.to_string() << " vs " << from_mem.to_string();
    EXPECT_EQ(from_file.message().rfind(path + ": ", 0), 0u) << from_file.message();
    EXPECT_EQ(from_file.message().find('\n'), std::string::npos) << "one-line message: " << from_file.message();
  }
  return from_file;
}

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(Npy, RoundTripEveryDtype) {
  TempDir dir;
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {2, 3, 4}, {1, 0, 3}, {3, 1}};
  for (const auto& shape : shapes) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> f32(n);
    std::vector<double> f64(n);
    std::vector<std::int32_t> i32(n);
    std::vector<std::int64_t> i64(n);
    std::vector<std::uint8_t> u8(n);
    std::vector<std::uint16_t> f16(n);
    for (std::int64_t i = 0; i < n; ++i) {
      f32[i] = static_cast<float>(i) * -0.375f + 1e-30f;
      f64[i] = static_cast<double>(i) / 3.0;
      i32[i] = static_cast<std::int32_t>(i * 100003) - 7;
      i64[i] = (std::int64_t{1} << 40) * i - 1;
      u8[i] = static_cast<std::uint8_t>(255 - i);
      f16[i] = static_cast<std::uint16_t>(0x3c00 + i);
    }
    for (const NpyArray& a : {make_npy(shape, f32), make_npy(shape, f64), make_npy(shape, i32), make_npy(shape, i64),
                              make_npy(shape, u8), make_npy_fp16(shape, f16)}) {
      const std::string path = dir.file(std::string("rt_") + npy_dtype_name(a.dtype) + ".npy");
      ASSERT_TRUE(write_npy(path, a).ok());
      NpyArray b;
      const Status s = read_npy(path, &b);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(b.dtype, a.dtype);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
      EXPECT_EQ(b.source, path);
      // numpy's layout: data starts at a multiple of 64, header ends in '\n'.
      const auto bytes = read_bytes(path);
      const std::size_t data_start = bytes.size() - a.data.size();
      EXPECT_EQ(data_start % 64, 0u);
      EXPECT_EQ(bytes[data_start - 1], '\n');
    }
  }
}

// Byte-identical to what numpy wrote for the case files.
TEST(Npy, WritesNumpysBytes) {
  const std::string path = std::string(TQ_TEST_DATA_DIR) + "/vllm-soa/s01_4bit_nc_d128_bs16_gqa4/query.npy";
  NpyArray q;
  ASSERT_TRUE(read_npy(path, &q).ok());
  std::vector<std::uint8_t> bytes;
  ASSERT_TRUE(serialize_npy(q, &bytes).ok());
  EXPECT_EQ(bytes, read_bytes(path));
}

TEST(Npy, Versions2And3AndPython2Longs) {
  for (int major : {2, 3}) {
    NpyArray a;
    const Status s = parse(npy_file(f4_dict("(2, 3)"), 24, major), &a);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  }
  NpyArray a;
  ASSERT_TRUE(parse(npy_file("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f4\"}", 24), &a).ok());
  EXPECT_EQ(a.element_count(), 6);
}

TEST(Npy, ReadsEveryCaseFile) {
  int files = 0;
  for (const auto& c : fs::directory_iterator(fs::path(TQ_TEST_DATA_DIR) / "vllm-soa")) {
    if (!c.is_directory()) continue;  // the folder's README
    for (const auto& f : fs::directory_iterator(c.path())) {
      if (f.path().extension() != ".npy") continue;
      NpyArray a;
      const Status s = read_npy(f.path().string(), &a);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(a.data.size(), a.byte_count()) << f.path();
      EXPECT_EQ(a.data.size() + 128, fs::file_size(f.path())) << f.path();  // numpy's 128-byte header
      ++files;
    }
  }
  EXPECT_EQ(files, 5 * 12);

  const std::string s01 = std::string(TQ_TEST_DATA_DIR) + "/vllm-soa/s01_4bit_nc_d128_bs16_gqa4/";
  NpyArray q;
  ASSERT_TRUE(read_npy(s01 + "query.npy", &q).ok());
  EXPECT_EQ(q.dtype, NpyDType::kFloat32);
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{3, 8, 128}));
  std::vector<float> qf;
  ASSERT_TRUE(to_float32(q, &qf).ok());
  EXPECT_EQ(qf.front(), 0x1.9d6f5ap-5f);  // values printed by numpy
  EXPECT_EQ(qf.back(), -1.592916488647461f);
  NpyArray kv;
  ASSERT_TRUE(read_npy(s01 + "kv_cache.npy", &kv).ok());
  EXPECT_EQ(kv.dtype, NpyDType::kUInt8);
  EXPECT_EQ(kv.shape, (std::vector<std::int64_t>{26, 16, 2, 134}));
  std::int64_t sum = 0;
  for (std::uint8_t b : kv.data) sum += b;
  EXPECT_EQ(sum, 11524730);
}

TEST(Npy, RejectsTruncationAtEveryCut) {
  TempDir dir;
  const auto good = npy_file(f4_dict("(3, 8, 16)"), 3 * 8 * 16 * 4);
  ASSERT_TRUE(parse(good).ok());
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    const Status s = parse_both(dir, std::vector<std::uint8_t>(good.begin(), good.begin() + cut));
    ASSERT_FALSE(s.ok()) << "cut at " << cut;
    EXPECT_TRUE(s.code() == StatusCode::kBufferTooSmall || s.code() == StatusCode::kInvalidArgument) << s.to_string();
  }
  const Status mid = parse_both(dir, std::vector<std::uint8_t>(good.begin(), good.end() - 288));
  EXPECT_EQ(mid.code(), StatusCode::kBufferTooSmall);
  EXPECT_TRUE(contains(mid, "truncated: header says shape (3, 8, 16) float32 = 1536 bytes of data, file has 1248"))
      << mid.message();
  EXPECT_TRUE(contains(parse_both(dir, {}), "empty file"));
  EXPECT_TRUE(contains(parse_both(dir, std::vector<std::uint8_t>(good.begin(), good.begin() + 40)),
                       "truncated: header length says 118 bytes of header, file has 30"));
}

TEST(Npy, RejectsTrailingBytesAndShapeMismatch) {
  TempDir dir;
  auto extra = npy_file(f4_dict("(3,)"), 12);
  extra.push_back(0);
  Status s = parse_both(dir, extra);
  EXPECT_TRUE(contains(s, "trailing bytes: header says shape (3,) float32 = 12 bytes of data, file has 13"))
      << s.message();
  s = parse_both(dir, npy_file(f4_dict("(4,)"), 12));
  EXPECT_EQ(s.code(), StatusCode::kBufferTooSmall);
  s = parse_both(dir, npy_file(f4_dict("(2,)"), 12));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = parse_both(dir, npy_file(f4_dict("()"), 0));
  EXPECT_TRUE(contains(s, "shape () float32 = 4 bytes of data, file has 0")) << s.message();
}

TEST(Npy, RejectsBadMagicAndVersion) {
  TempDir dir;
  auto bytes = npy_file(f4_dict("(3,)"), 12);
  bytes[0] = 'P';
  Status s = parse_both(dir, bytes);
  EXPECT_TRUE(contains(s, "bad magic: file starts with 50 4e 55 4d 50 59")) << s.message();
  s = parse_both(dir, {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0});  // an .npz (zip)
  EXPECT_TRUE(contains(s, "not a .npy file")) << s.message();
  s = parse_both(dir, {'{', '}'});
  EXPECT_TRUE(contains(s, "bad magic")) << s.message();
  for (auto [major, minor] : {std::pair{4, 0}, {0, 0}, {1, 1}, {255, 255}}) {
    bytes = npy_file(f4_dict("(3,)"), 12);
    bytes[6] = static_cast<std::uint8_t>(major);
    bytes[7] = static_cast<std::uint8_t>(minor);
    s = parse_both(dir, bytes);
    EXPECT_TRUE(contains(s, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor)))
        << s.message();
  }
  bytes = npy_file(f4_dict("(3,)"), 12);
  bytes[8] = bytes[9] = 0;
  EXPECT_TRUE(contains(parse_both(dir, bytes), "header length is 0"));
}

TEST(Npy, RejectsGarbledHeaders) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hello", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ", "expected a quoted key or '}'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'fortran_order': False, 'shape': (3,)}", "missing key 'descr'"},
      {"{'descr': '<f4', 'shape': (3,)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "a 1-d shape is (n,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", "shape must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}", "expected a dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}", "leading zero"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}", "expected ',' or ')'"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (3,)}", "descr must be a quoted string"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}", "expected ':' after key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "fortran_order must be True or False"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", "unexpected text after '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\xff", "unexpected byte 255"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", "negative dimension -3"},
  };
  for (const auto& [dict, why] : cases) {
    const Status s = parse_both(dir, npy_file(dict, 12));
    EXPECT_FALSE(s.ok()) << dict;
    EXPECT_TRUE(contains(s, why)) << dict << " -> " << s.message();
  }
  auto no_newline = npy_file(f4_dict("(3,)"), 12);
  no_newline[127] = ' ';
  EXPECT_TRUE(contains(parse_both(dir, no_newline), "does not end with a newline"));
}

TEST(Npy, RejectsOverflowingShapes) {
  TempDir dir;
  Status s = parse_both(dir, npy_file(f4_dict("(99999999999999999999,)"), 0));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(contains(s, "99999999999999999999 overflows int64")) << s.message();
  s = parse_both(dir, npy_file(f4_dict("(4611686018427387904, 4)"), 0));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(contains(s, "overflows")) << s.message();
  s = parse_both(dir, npy_file(f4_dict("(0, 4611686018427387904, 4)"), 0));  // zero-size is no loophole
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  s = parse_both(dir, npy_file(f4_dict("(1000000000, 1000000000)"), 8));  // fits int64, not the file
  EXPECT_EQ(s.code(), StatusCode::kBufferTooSmall);
}

TEST(Npy, RejectsUnsupportedLayoutsAndDtypes) {
  TempDir dir;
  Status s = parse_both(dir, npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12));
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(contains(s, "fortran_order True")) << s.message();
  for (const char* d : {">f4", ">f2", ">f8", ">i4", ">i8"}) {
    s = parse_both(dir, npy_file(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (3,), }", 24));
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_TRUE(contains(s, std::string("big-endian dtype '") + d + "'")) << s.message();
  }
  for (const char* d : {"<c8", "|b1", "<U10", "<M8[ns]", "|i1", "<u2", "=f4", "|O", ""}) {
    s = parse_both(dir, npy_file(std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (3,), }", 12));
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_TRUE(contains(s, std::string("unsupported dtype '") + d + "'")) << s.message();
  }
  s = parse_both(dir, npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 12));
  EXPECT_TRUE(contains(s, "structured dtypes")) << s.message();
  NpyArray a;  // '<u1' is uint8 (byte order is moot)
  ASSERT_TRUE(parse(npy_file("{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", 3), &a).ok());
  EXPECT_EQ(a.dtype, NpyDType::kUInt8);
}

TEST(Npy, RejectsMissingFilesAndDirectories) {
  TempDir dir;
  NpyArray a;
  Status s = read_npy(dir.file("nope.npy"), &a);
  EXPECT_EQ(s.message(), dir.file("nope.npy") + ": no such file");
  s = read_npy(dir.path().string(), &a);
  EXPECT_EQ(s.message(), dir.path().string() + ": is a directory, not a .npy file");
  s = write_npy(dir.file("missing_dir/x.npy"), make_npy<float>({1}, std::vector<float>{1.f}));
  EXPECT_TRUE(contains(s, "missing_dir/x.npy: cannot open for writing")) << s.message();
  s = write_npy(dir.file("x.npy"), make_npy<float>({2}, std::vector<float>{1.f}));
  EXPECT_TRUE(contains(s, "x.npy: data has 4 bytes, shape (2,) float32 needs 8")) << s.message();
}

// Random corruption of a valid file: every outcome is a Status; an accepted
// file is self-consistent.
TEST(Npy, MutationsNeverCrash) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const auto good = npy_file(f4_dict("(2, 3, 4)"), 96);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % 128;  // preamble and header
      bytes[at] =
          (rng() % 2) ? static_cast<std::uint8_t>(rng()) : static_cast<std::uint8_t>(" (),:'0123456789{}"[rng() % 18]);
    }
    if (rng() % 4 == 0) bytes.resize(rng() % (bytes.size() + 1));
    NpyArray a;
    if (parse(bytes, &a).ok()) {
      ++accepted;
      ASSERT_EQ(a.data.size(), a.byte_count()) << "seed " << seed << " trial " << trial;
    }
  }
  std::printf("accepted %d mutated files\n", accepted);
}

TEST(NpyConvert, Floats) {
  // float16: exact, including subnormals, inf and signed zero.
  const std::vector<std::uint16_t> h = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x8000};
  std::vector<float> f;
  ASSERT_TRUE(to_float32(make_npy_fp16({6}, h), &f).ok());
  EXPECT_EQ(f, (std::vector<float>{1.f, -2.f, 0x1p-24f, 65504.f, INFINITY, -0.f}));
  EXPECT_TRUE(std::signbit(f[5]));
  std::vector<double> d;
  ASSERT_TRUE(to_float64(make_npy_fp16({6}, h), &d).ok());
  EXPECT_EQ(d[2], 0x1p-24);
  ASSERT_TRUE(to_float32(make_npy<double>({2}, std::vector<double>{0.1, -1e300}), &f).ok());
  EXPECT_EQ(f, (std::vector<float>{0.1f, -INFINITY}));
  NpyArray ints = make_npy<std::int32_t>({1}, std::vector<std::int32_t>{1});
  ints.source = "seq_lens.npy";
  const Status s = to_float32(ints, &f);
  EXPECT_EQ(s.message(), "seq_lens.npy: dtype int32 cannot be read as float32");
}

TEST(NpyConvert, Integers) {
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  ASSERT_TRUE(to_int64(make_npy<std::uint8_t>({3}, std::vector<std::uint8_t>{0, 7, 255}), &i64).ok());
  EXPECT_EQ(i64, (std::vector<std::int64_t>{0, 7, 255}));
  ASSERT_TRUE(
      to_int32(make_npy<std::int64_t>({3}, std::vector<std::int64_t>{-5, 2147483647, -2147483648LL}), &i32).ok());
  EXPECT_EQ(i32, (std::vector<std::int32_t>{-5, 2147483647, -2147483647 - 1}));
  NpyArray big = make_npy<std::int64_t>({4}, std::vector<std::int64_t>{0, 1, 2147483648LL, 3});
  big.source = "block_table.npy";
  Status s = to_int32(big, &i32);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "block_table.npy: element 2 = 2147483648 does not fit in int32");
  s = to_int64(make_npy<float>({1}, std::vector<float>{1.f}), &i64);
  EXPECT_EQ(s.message(), "array: dtype float32 cannot be read as int64");
  NpyArray bad = make_npy<std::int32_t>({3}, std::vector<std::int32_t>{1, 2});
  EXPECT_FALSE(to_int32(bad, &i32).ok());  // data shorter than its shape
}

}  // namespace
}  // namespace turboquant::io
