// tq on vLLM's AoS layout (issue 12): the six real AoS caches of
// tests/data/vllm-aos (vLLM 0.33.0 on an H200) through validate, encode,
// decode and inspect; copies whose meta.json names the wrong layout or FP8
// flavour must fail validation, not pass silently; tq info's slot map; tq
// bench --layout; bad layout and flavour names.
#include <cmath>
#include <cstring>

#include "common/fast_tolerance.hpp"
#include "tq_runner.hpp"
#include "turboquant/io/case_dir.hpp"
#include "turboquant/io/npy.hpp"

namespace {

using namespace tq_test;
namespace io = turboquant::io;

const fs::path kAosCases = fs::path(TQ_TEST_DATA_DIR) / "vllm-aos";
const char* const kAosCaseNames[] = {"a01_4bit_nc_d128_bs16_gqa4", "a02_k8v4_d128_bs16_gqa4",
                                     "a03_k3v4_nc_d64_bs32_mha",   "a04_3bit_nc_d256_bs16_gqa8",
                                     "a05_4bit_nc_d128_bs64_sharp", "a06_k8v4_e4b15_d128_bs16_gqa4"};

io::CaseDir load(const fs::path& dir) {
  io::CaseDir c;
  const auto s = io::load_case(dir.string(), io::CaseLoadOptions::all_required(), &c);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

fs::path copy_case(const char* name) {
  const fs::path dst = scratch() / name;
  fs::copy(kAosCases / name, dst, fs::copy_options::recursive);
  return dst;
}

// A copy of an AoS case whose meta.json has `from` replaced by `to`.
fs::path edited_copy(const char* name, const std::string& from, const std::string& to) {
  const fs::path dst = copy_case(name);
  std::string meta = slurp(dst / "meta.json");
  const std::size_t at = meta.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) meta.replace(at, from.size(), to);
  std::ofstream(dst / "meta.json", std::ios::trunc) << meta;
  return dst;
}

class AosCase : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dir() const { return q(kAosCases / GetParam()); }
  bool fp8() const { return std::string(GetParam()).find("k8v4") != std::string::npos; }
  std::string fp8_format() const {
    return std::string(GetParam()).find("e4b15") != std::string::npos ? "e4b15" : "e4m3";
  }
};

TEST_P(AosCase, ValidatePassesOnVllmsAosDecode) {
  const Result r = tq("validate " + dir());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", AoS;"), std::string::npos) << r.out;
  const json j = tq("validate " + dir() + " --json").parsed();
  EXPECT_TRUE(j["pass"].get<bool>());
  EXPECT_EQ(j["layout"], "aos");
  if (fp8()) EXPECT_EQ(j["fp8_format"], fp8_format());
  EXPECT_LE(j["vs_golden"]["rel_l2"].get<double>(), 1e-6);
  EXPECT_LE(j["golden_vs_f64_dequant"]["rel_l2"].get<double>(), 1e-6);
  // The tool's float64 attention (over the library's fp32 dequantization) and
  // the case's, both over the AoS bytes.
  EXPECT_LE(j["f64_dequant_vs_reference_out_f64"]["rel_l2"].get<double>(), 1e-6);
  // The quantization itself: 0.10 .. 0.29 on these cases (README).
  EXPECT_GT(j["f64_dequant_vs_f64_original"]["rel_l2"].get<double>(), 0.05);
  EXPECT_LT(j["f64_dequant_vs_f64_original"]["rel_l2"].get<double>(), 0.4);
}

// Key codes, FP8 bytes and metadata as vLLM stored them; value codes but for
// the boundary flips of Triton's approximate division (test_reference_cases_aos).
TEST_P(AosCase, EncodeWritesVllmsAosBytes) {
  const fs::path out = scratch() / "cache.npy";
  const Result r = tq("encode " + dir() + " --out " + q(out) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = r.parsed();
  EXPECT_EQ(j["layout"], "aos");
  EXPECT_EQ(j["key_codes_equal"], j["key_codes"]);
  EXPECT_EQ(j["meta_fields_equal"], j["meta_fields"]);
  EXPECT_GE(j["value_codes_equal"].get<double>(), 0.9975 * j["value_codes"].get<double>());
  EXPECT_GE(j["byte_agreement"].get<double>(), 0.998);
  io::NpyArray ours, theirs;
  ASSERT_TRUE(io::read_npy(out.string(), &ours).ok());
  ASSERT_TRUE(io::read_npy((kAosCases / GetParam() / "kv_cache.npy").string(), &theirs).ok());
  ASSERT_EQ(ours.shape, theirs.shape);
  std::size_t same = 0;
  for (std::size_t i = 0; i < ours.data.size(); ++i) same += ours.data[i] == theirs.data[i];
  EXPECT_EQ(j["bytes_equal"].get<std::size_t>(), same);
}

TEST_P(AosCase, DecodeWritesTheGoldenOutput) {
  const fs::path out = scratch() / "out.npy";
  const Result r = tq("decode " + dir() + " --backend cpu-ref --out " + q(out) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.parsed()["layout"], "aos");
  const json v = tq("validate " + dir() + " --output " + q(out) + " --json").parsed();
  EXPECT_EQ(v["vs_golden"]["rel_l2"].get<double>(), 0.0);
}

// Every backend `tq backends` says runs here (each CPU ISA, CUDA where built
// and present) decodes the AoS cache to the golden bits (cuda:fast: within
// its 1e-3, fast_tolerance.hpp) and encodes the same bytes as the golden model.
TEST_P(AosCase, EveryAvailableBackendReproducesTheGoldenModel) {
  const fs::path d = scratch();
  ASSERT_EQ(tq("encode " + dir() + " --backend cpu-ref --out " + q(d / "golden.npy")).exit_code, 0);
  const std::string golden_cache = slurp(d / "golden.npy");
  const Result list = tq("backends --json");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  int ran = 0;
  for (const json& b : list.parsed()) {
    if (!b["available"].get<bool>()) continue;
    const std::string name = b["name"];
    SCOPED_TRACE(name);
    std::string file = name;
    for (char& ch : file) ch = ch == ':' ? '_' : ch;
    const fs::path out = d / ("out_" + file + ".npy"), cache = d / ("cache_" + file + ".npy");
    const Result r = tq("decode " + dir() + " --backend " + name + " --threads 2 --out " + q(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json v = tq("validate " + dir() + " --output " + q(out) + " --json").parsed();
    EXPECT_LE(v["vs_golden"]["rel_l2"].get<double>(),
              b["exact_decode"].get<bool>() ? 0.0 : turboquant::testing::fast_decode_tolerance(dir()));
    const Result e = tq("encode " + dir() + " --backend " + name + " --threads 2 --out " + q(cache));
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_TRUE(slurp(cache) == golden_cache) << "encode bytes differ from cpu-ref's";
    ++ran;
  }
  EXPECT_GE(ran, 2);  // cpu-ref and cpu:scalar run everywhere
}

TEST_P(AosCase, InspectReadsTheAosSlots) {
  const Result r = tq("inspect " + dir() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = r.parsed();
  EXPECT_EQ(j["layout"], "aos");
  EXPECT_EQ(j["non_finite_metadata"].get<int>(), 0);
  EXPECT_EQ(j["nonzero_bytes_outside_referenced_slots"].get<int>(), 0);
  EXPECT_EQ(j["nonzero_padding_bytes"].get<int>(), 0);
  EXPECT_EQ(j["unreferenced_blocks"].size(), 3u);  // README: 3 unused blocks per case
  const io::CaseDir c = load(kAosCases / GetParam());
  const int D = c.head_dim(), hk = c.num_kv_heads();
  std::int64_t values = 0;
  for (const json& n : j["value_code_histogram"]) values += n.get<std::int64_t>();
  EXPECT_EQ(values, c.num_tokens * hk * D);
  for (int h = 0; h < hk; ++h) {
    SCOPED_TRACE("head " + std::to_string(h));
    const json& hs = j["heads"][h];
    // The extremes of the original K of this head: ||k|| (Lloyd-Max) or k (FP8).
    double lo = INFINITY, hi = -INFINITY;
    std::int64_t beyond_e4b15 = 0, near_e4b15 = 0;
    for (std::int64_t i = 0; i < c.num_tokens; ++i) {
      const float* k = &c.keys.values[(i * hk + h) * D];
      double sum = 0;
      for (int d = 0; d < D; ++d) {
        sum += double(k[d]) * k[d];
        lo = fp8() ? std::min(lo, double(k[d])) : lo, hi = fp8() ? std::max(hi, double(k[d])) : hi;
        beyond_e4b15 += std::fabs(k[d]) >= 1.75f;
        near_e4b15 += std::fabs(k[d]) >= 1.6875f;  // may round up to 1.75
      }
      if (!fp8()) lo = std::min(lo, std::sqrt(sum)), hi = std::max(hi, std::sqrt(sum));
    }
    if (!fp8()) {
      // AoS stores the raw ||k|| (fp16), not the corrected norm SoA stores.
      EXPECT_NEAR(hs["key_norm"]["min"].get<double>(), lo, lo * 1e-3);
      EXPECT_NEAR(hs["key_norm"]["max"].get<double>(), hi, hi * 1e-3);
      ASSERT_TRUE(hs.contains("key_norm_decoded"));
      EXPECT_GT(hs["key_norm_decoded"]["max"].get<double>(), 0.0);
      continue;
    }
    ASSERT_TRUE(hs.contains("fp8_key"));
    EXPECT_EQ(j["fp8_format"], fp8_format());
    if (fp8_format() == "e4m3") {  // |k| < 448: every key as the bf16 value rounded to e4m3
      EXPECT_NEAR(hs["fp8_key"]["max"].get<double>(), hi, std::fabs(hi) / 16);
      EXPECT_NEAR(hs["fp8_key"]["min"].get<double>(), lo, std::fabs(lo) / 16);
      EXPECT_EQ(hs["fp8_key"]["at_store_limit"].get<int>(), 0);
    } else {  // e4b15 holds |k| <= 1.75 only: the store clipped the rest
      EXPECT_EQ(hs["fp8_key"]["max"].get<double>(), 1.75);
      EXPECT_EQ(hs["fp8_key"]["min"].get<double>(), -1.75);
      EXPECT_GE(hs["fp8_key"]["at_store_limit"].get<std::int64_t>(), beyond_e4b15);
      EXPECT_LE(hs["fp8_key"]["at_store_limit"].get<std::int64_t>(), near_e4b15);
    }
  }
  const Result text = tq("inspect " + dir());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("layout    aos: slot (t, h) at (t * " + std::to_string(hk) + " + h) * "), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(fp8() ? "fp8 key values (" + fp8_format() + ")" : "key norm / ||c|| (decoded)"),
            std::string::npos)
      << text.out;
}

// meta.json decides how the bytes are read: the same bytes called SoA, or
// the other FP8 flavour, decode to something else and validation says so.
TEST_P(AosCase, AWrongLayoutOrFlavourInMetaJsonFailsValidation) {
  const fs::path soa = edited_copy(GetParam(), "\"layout\": \"aos\"", "\"layout\": \"soa\"");
  const Result r = tq("validate " + q(soa) + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  if (!fp8()) return;
  const std::string other = fp8_format() == "e4m3" ? "e4b15" : "e4m3";
  const fs::path flavour = edited_copy(GetParam(), "\"fp8_format\": \"" + fp8_format() + "\"",
                                       "\"fp8_format\": \"" + other + "\"");
  const Result f = tq("validate " + q(flavour) + " --json");
  EXPECT_EQ(f.exit_code, 1) << f.out << f.err;
  EXPECT_EQ(f.parsed()["fp8_format"], other);
}

INSTANTIATE_TEST_SUITE_P(VllmAos, AosCase, ::testing::ValuesIn(kAosCaseNames),
                         [](const auto& info) { return std::string(info.param).substr(0, 3); });

// Bytes where nothing was stored, and NaN metadata in a referenced AoS slot.
TEST(AosInspect, FindsStrayBytesAndNonFiniteMetadata) {
  const fs::path dir = copy_case(kAosCaseNames[0]);
  const io::CaseDir c = load(dir);
  const json clean = tq("inspect " + q(dir) + " --json").parsed();
  const std::int64_t unused = clean["unreferenced_blocks"][0].get<std::int64_t>();
  const int stored = c.block_table.values[0];  // sequence 0, position 0: a referenced slot
  io::NpyArray cache;
  ASSERT_TRUE(io::read_npy((dir / "kv_cache.npy").string(), &cache).ok());
  const turboquant::BlockLayout& l = c.layout;
  cache.data[l.block_base(unused) + l.value_data_offset(3, 1)] = 0x5a;
  ASSERT_TRUE(io::write_npy((dir / "kv_cache.npy").string(), cache).ok());
  const json stray = tq("inspect " + q(dir) + " --json").parsed();
  EXPECT_EQ(stray["nonzero_bytes_outside_referenced_slots"].get<int>(), 1);
  EXPECT_EQ(stray["slots_with_stray_bytes"].get<int>(), 1);
  const Result text = tq("inspect " + q(dir));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("(first: block " + std::to_string(unused) + " slot 3 head 1)"), std::string::npos)
      << text.out;

  const std::int64_t norm = l.block_base(stored) + l.meta_field_offset(0, 1, turboquant::MetaField::kKeyNorm);
  cache.data[norm] = 0x00, cache.data[norm + 1] = 0x7e;  // fp16 NaN
  ASSERT_TRUE(io::write_npy((dir / "kv_cache.npy").string(), cache).ok());
  const Result bad = tq("inspect " + q(dir));
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("block " + std::to_string(stored) + " slot 0 head 1 key norm = nan"), std::string::npos)
      << bad.err;
}

}  // namespace
