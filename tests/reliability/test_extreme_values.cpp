// Extreme but finite inputs: magnitudes up to 1e6 in K/V (fp16 metadata
// clamps to +-65504, never inf), the -125,000 attention sink of vLLM
// gh-53334, scores up to +-1e4 after scaling (the online softmax never
// overflows), vectors whose values are all equal (zero range: scale 1e-8),
// and FP8 keys beyond the e4b15 range (+-1.75 stored; NaN and inf too).
// Each decode is compared with float64 attention over the dequantized cache.
// Every preset runs in both layouts (the AoS key norm is the raw ||k||, so
// its clamp meets other numbers than SoA's folded norm).
#include <gtest/gtest.h>

#include <random>

#include "common/shape_grid.hpp"
#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

constexpr float kFp16Max = 65504.0f;

// A preset in one layout: the parameter of the suites below.
struct PresetLayout {
  Preset preset;
  LayoutKind layout;
};
std::string preset_layout_name(const ::testing::TestParamInfo<PresetLayout>& info) {
  return tqt::preset_short_name(info.param.preset) + (info.param.layout == LayoutKind::kAoS ? "_aos" : "");
}
std::vector<PresetLayout> presets_in_both_layouts() {
  std::vector<PresetLayout> v;
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    for (Preset p : kAllPresets) v.push_back({p, layout});
  }
  return v;
}

tqt::Problem base(Preset preset, int dims, std::uint32_t s, std::vector<int> lens = {50, 17},
                  LayoutKind layout = LayoutKind::kSoA, Fp8Format fp8 = Fp8Format::kE4m3) {
  tqt::ProblemSpec spec;
  spec.format = core::preset_format(preset, dims, layout, fp8);
  spec.num_kv_heads = 2;
  spec.group = 2;
  spec.seq_lens = std::move(lens);
  spec.seed = s;
  return tqt::make_problem(spec);
}

// Decodes with every backend; checks finiteness, agreement of the CPU backend
// with the reference to the bit, and closeness to float64 attention over the
// dequantized cache. Returns the reference's out.
std::vector<float> decode_and_check(const tqt::Problem& p, double out_tol, double lse_tol_rel,
                                    const std::string& what) {
  std::vector<double> out64, lse64;
  std::vector<float> ref_out, ref_lse;
  for (const DecodeBackend& be : decode_backends()) {
    std::vector<float> out, lse;
    const DecodeArgs a = p.args(out, lse);
    const Status s = be.decode(p.view(), a);
    EXPECT_TRUE(s.ok()) << what << " " << be.name << ": " << s.to_string();
    EXPECT_TRUE(all_finite(out)) << what << " " << be.name << ": non-finite output";
    if (be.name == "reference") {
      tqt::f64_attention(oracle_input(p.view(), a), out64, lse64);
      const Error64 e = compare64(out, lse, out64, lse64);
      double lse_scale = 1;
      for (double x : lse64) lse_scale = std::max(lse_scale, std::abs(x));
      EXPECT_LE(e.out_rel, out_tol) << what << ": out vs float64";
      EXPECT_LE(e.lse_abs / lse_scale, lse_tol_rel) << what << ": lse vs float64 (scale " << lse_scale << ")";
      ref_out = out;
      ref_lse = lse;
    } else {
      EXPECT_TRUE(bits_equal(out, ref_out)) << what << " " << be.name << ": out bits differ from the reference";
      EXPECT_TRUE(bits_equal(lse, ref_lse)) << what << " " << be.name << ": lse bits differ from the reference";
    }
  }
  return ref_out;
}

// Each test of this suite runs once per preset and layout.
class ExtremePreset : public ::testing::TestWithParam<PresetLayout> {
 protected:
  Preset preset_ = GetParam().preset;
  LayoutKind layout_ = GetParam().layout;
  tqt::Problem base(int dims, std::uint32_t s, std::vector<int> lens = {50, 17}) const {
    return tq_rel::base(preset_, dims, s, std::move(lens), layout_);
  }
  std::string what() const { return std::string(preset_name(preset_)) + " " + layout_name(layout_); }
};

TEST_P(ExtremePreset, MagnitudesUpTo1e6ClampTheFp16MetadataAndDecodeFinite) {
  const std::uint32_t s = seed(21);
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (float mag : {1e3f, 1e5f, 1e6f}) {
      if (t == DType::kFloat16 && mag > kFp16Max) continue;  // not representable as fp16 input
      tqt::Problem p = base(128, s);
      std::mt19937 rng(s);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (float& k : p.keys) k = u(rng) * mag;
      for (float& v : p.values) v = u(rng) * mag;
      ASSERT_TRUE(reencode(p, t).ok());
      std::string where;
      EXPECT_TRUE(metadata_finite(p.layout, p.cache.data(), p.slots, &where))
          << what() << " " << mag << ": " << where;
      // A value vector with min -1e6 stores zero = -65504, not -inf.
      const float zero = core::read_meta(p.layout, p.cache.data() + p.layout.block_base(p.slots[0] / p.layout.block_size),
                                         static_cast<int>(p.slots[0] % p.layout.block_size), 0, MetaField::kValueZero);
      if (mag >= 1e5f) {
        EXPECT_EQ(zero, -kFp16Max) << what();
      }
      // Scores are huge (keys ~mag, norms clamped at 65504): the softmax is
      // one-hot; decode must stay finite and agree with float64.
      decode_and_check(p, 1e-4, 1e-5, what() + " " + dtype_name(t) + " " + std::to_string(mag));
    }
  }
}

TEST_P(ExtremePreset, AttentionSinkOfMinus125000StaysFinite) {
  // vLLM gh-53334: a value vector holding -125,000 (an attention-sink token)
  // rounded its zero point to fp16 -inf and the whole vector to inf.
  const std::uint32_t s = seed(22);
  tqt::Problem p = base(128, s, {64, 33});
  const int row = p.layout.num_kv_heads * p.layout.format.head_dim;
  for (int d = 0; d < p.layout.format.head_dim; ++d) p.values[d] = d == 0 ? -125000.0f : 0.01f * d;
  p.values[3 * row + 9] = -125000.0f;  // and one more sink, in head 0 of token 3
  p.keys[0] *= 10.0f;                   // the sink token also attracts attention
  ASSERT_TRUE(reencode(p).ok());
  const std::uint8_t* block = p.cache.data() + p.layout.block_base(p.slots[0] / p.layout.block_size);
  const int t = static_cast<int>(p.slots[0] % p.layout.block_size);
  EXPECT_EQ(core::read_meta(p.layout, block, t, 0, MetaField::kValueZero), -kFp16Max) << what();
  const float scale = core::read_meta(p.layout, block, t, 0, MetaField::kValueScale);
  EXPECT_TRUE(std::isfinite(scale)) << what();
  std::string where;
  EXPECT_TRUE(metadata_finite(p.layout, p.cache.data(), p.slots, &where)) << where;
  decode_and_check(p, 1e-5, 1e-6, "sink " + what());
}

// Largest |score| (natural-log units, after softmax_scale) of a problem:
// probed with the float64 oracle on the query times 1e3, where the LSE is the
// largest score to within log(seq_len) / 1e3.
double max_abs_score(const tqt::Problem& p) {
  tqt::Problem probe = p;
  for (float& q : probe.query) q *= 1e3f;
  std::vector<float> out, lse;
  std::vector<double> out64, lse64;
  tqt::f64_attention(oracle_input(probe.view(), probe.args(out, lse)), out64, lse64);
  double m = 0;
  for (double l : lse64) m = std::max(m, std::abs(l));
  return m / 1e3;
}

TEST_P(ExtremePreset, ScoresUpTo1e4AfterScalingDoNotOverflowTheSoftmax) {
  const std::uint32_t s = seed(23);
  for (double target : {1e2, 1e3, 1e4}) {
    for (bool all_negative : {false, true}) {
      tqt::Problem p = base(64, s, {80, 31});
      if (all_negative) {
        // Every key close to one direction k0, the query along -k0: all
        // scores near -target (a naive exp(score) would underflow to 0/0).
        std::mt19937 rng(s);
        std::normal_distribution<float> n(0.0f, 1.0f);
        const int dims = p.layout.format.head_dim;
        std::vector<float> k0(dims);
        for (float& x : k0) x = n(rng);
        for (std::size_t i = 0; i < p.keys.size(); ++i) p.keys[i] = k0[i % dims] + 0.05f * n(rng);
        for (std::size_t i = 0; i < p.query.size(); ++i) p.query[i] = -k0[i % dims];
        ASSERT_TRUE(reencode(p).ok());
      }
      const float factor = static_cast<float>(target / max_abs_score(p));
      for (float& q : p.query) q *= factor;
      const double reached = max_abs_score(p);
      EXPECT_GT(reached, 0.9 * target);
      EXPECT_LT(reached, 1.1 * target);
      if (all_negative) {
        std::vector<float> out, lse;
        std::vector<double> out64, lse64;
        tqt::f64_attention(oracle_input(p.view(), p.args(out, lse)), out64, lse64);
        for (double l : lse64) EXPECT_LT(l, -0.5 * target) << "every score should be far below 0";
      }
      // fp32 scores of magnitude 1e4 carry ~1e-3 absolute rounding, which
      // exp() turns into ~1e-3 relative weight errors: out is compared at
      // 1e-2 (relative to its largest element), the LSE at 1e-6 of its size.
      decode_and_check(p, 1e-2, 1e-6,
                       what() + " |scores| ~" + std::to_string(target) +
                           (all_negative ? " all negative" : ""));
    }
  }
}

TEST_P(ExtremePreset, AllValuesEqualWithinAVectorUseTheMinimumScale) {
  const std::uint32_t s = seed(24);
  for (float c : {0.0f, 3.25f, -1.5e-3f, 1e6f, -125000.0f}) {
    tqt::Problem p = base(64, s, {20, 5});
    std::fill(p.values.begin(), p.values.end(), c);
    ASSERT_TRUE(reencode(p).ok());
    const BlockLayout& l = p.layout;
    for (std::int64_t slot : p.slots) {
      const std::uint8_t* block = p.cache.data() + l.block_base(slot / l.block_size);
      const int t = static_cast<int>(slot % l.block_size);
      for (int h = 0; h < l.num_kv_heads; ++h) {
        // scale 1e-8 rounds to fp16 +0 (below the smallest subnormal); zero = c clamped.
        EXPECT_EQ(core::read_meta(l, block, t, h, MetaField::kValueScale), core::fp16_to_float(core::float_to_fp16_clamped(1e-8f)));
        EXPECT_EQ(core::read_meta(l, block, t, h, MetaField::kValueZero),
                  core::fp16_to_float(core::float_to_fp16_clamped(c)));
        const std::uint8_t* codes = block + l.value_data_offset(t, h);
        for (int i = 0; i < l.format.value_data_bytes(); ++i) ASSERT_EQ(codes[i], 0) << "all codes are 0";
      }
    }
    const std::vector<float> out = decode_and_check(p, 1e-6, 1e-6, what() + " const " + std::to_string(c));
    const float expect = core::fp16_to_float(core::float_to_fp16_clamped(c));
    for (float o : out) ASSERT_NEAR(o, expect, std::abs(expect) * 1e-6) << "attention over equal values returns that value";
  }
}

TEST_P(ExtremePreset, ZeroKeysGiveUniformAttention) {
  const std::uint32_t s = seed(25);
  tqt::Problem p = base(64, s, {37, 16});
  std::fill(p.keys.begin(), p.keys.end(), 0.0f);
  ASSERT_TRUE(reencode(p).ok());
  std::string where;
  EXPECT_TRUE(metadata_finite(p.layout, p.cache.data(), p.slots, &where)) << where;
  decode_and_check(p, 1e-5, 1e-6, "zero keys " + what());
}

INSTANTIATE_TEST_SUITE_P(Presets, ExtremePreset, ::testing::ValuesIn(presets_in_both_layouts()), preset_layout_name);

// e4b15 FP8 keys (what vLLM writes below sm_89) hold |k| <= 1.75 only:
// larger magnitudes store +-1.75 (bytes 0x7e / 0xfe), and so do +-inf and NaN
// (check_finite off); smaller ones round to 3 mantissa bits (subnormals below
// 2^-14). Every encode backend writes the same bytes; the decode of such keys
// stays finite and matches float64. Bytes are read through the oracle's own
// slot map and e4b15 decoding. Both layouts.
TEST(Extreme, E4b15KeysClampTo1p75IncludingNonFinite) {
  const std::uint32_t s = seed(27);
  for (LayoutKind layout : {LayoutKind::kAoS, LayoutKind::kSoA}) {
    tqt::Problem p = base(Preset::kK8V4, 64, s, {40, 9}, layout, Fp8Format::kE4b15);
    const std::string what = std::string("e4b15 ") + layout_name(layout);
    // Magnitudes 2^-20 .. 2^20 over the elements, both signs; a few non-finite.
    for (std::size_t i = 0; i < p.keys.size(); ++i) {
      const float sign = (i / 3) % 2 ? -1.0f : 1.0f;
      p.keys[i] = sign * std::ldexp(1.0f + static_cast<float>(i % 7) / 7, static_cast<int>(i % 41) - 20);
    }
    const float kNonFinite[] = {INFINITY, -INFINITY, NAN};
    for (std::size_t i = 0; i < 3; ++i) p.keys[100 + 37 * i] = kNonFinite[i];
    std::vector<std::uint8_t> first;
    for (const EncodeBackend& be : encode_backends()) {
      std::fill(p.cache.begin(), p.cache.end(), 0);
      EncodeArgs e = p.encode_args();
      e.check_finite = false;
      ASSERT_TRUE(be.encode(CacheView{p.layout, p.cache.data(), p.num_blocks}, e).ok()) << what << " " << be.name;
      if (first.empty()) first = p.cache;
      EXPECT_TRUE(p.cache == first) << what << " " << be.name << " wrote other bytes than " << encode_backends()[0].name;
    }
    const tqt::OracleSlotMap m(p.layout);
    const int dims = 64, hk = p.layout.num_kv_heads;
    int clamped = 0;
    for (std::size_t token = 0; token < p.slots.size(); ++token) {
      const std::int64_t slot = p.slots[token];
      const std::uint8_t* block = p.cache.data() + slot / m.bs * m.block_bytes();
      for (int h = 0; h < hk; ++h) {
        for (int d = 0; d < dims; ++d) {
          const float k = p.keys[(token * hk + h) * dims + d];
          const std::uint8_t byte = block[m.key_at(static_cast<int>(slot % m.bs), h) + d];
          const double got = tqt::oracle_fp8(Fp8Format::kE4b15, byte);
          if (!(std::fabs(k) < 1.75f)) {  // >= 1.75, inf, NaN
            ++clamped;
            ASSERT_EQ(byte, std::signbit(k) ? 0xfe : 0x7e) << what << " key " << k;
          } else if (std::fabs(k) >= std::ldexp(1.0f, -14)) {
            ASSERT_LE(std::fabs(got - k), std::fabs(k) / 16) << what << " key " << k << " byte " << int{byte};
          } else {
            ASSERT_LE(std::fabs(got - k), std::ldexp(1.0, -18) + std::ldexp(1.0, -24)) << what << " key " << k << " byte " << int{byte};
          }
        }
      }
    }
    EXPECT_GT(clamped, 100) << what;
    decode_and_check(p, 1e-5, 1e-6, what);
  }
}

TEST(Extreme, HalfPrecisionOutputSaturatesToInfBeyond65504) {
  // Documented (ARITHMETIC.md §1): fp32 -> binary16 output rounds to nearest
  // even and overflows to inf; values near 1e6 need an fp32 or bf16 output.
  tqt::Problem p = base(Preset::k4BitNc, 64, seed(26), {16});
  for (float& v : p.values) v = 9e5f;
  for (std::size_t i = 0; i < p.values.size(); i += 64) p.values[i] = -65504.0f;  // range 9.65e5: scale 64336
  ASSERT_TRUE(reencode(p).ok());
  std::vector<float> out, lse;
  DecodeArgs a = p.args(out, lse);
  std::vector<std::uint16_t> half(out.size());
  std::vector<std::uint16_t> bf(out.size());
  for (const DecodeBackend& be : decode_backends()) {
    a.out_dtype = DType::kFloat16;
    a.out = {half.data(), half.size() * 2};
    ASSERT_TRUE(be.decode(p.view(), a).ok());
    int inf = 0;
    for (std::uint16_t h : half) inf += h == 0x7c00;
    EXPECT_GT(inf, 0) << be.name << ": fp16 output of ~9e5 is +inf by contract";
    a.out_dtype = DType::kBFloat16;
    a.out = {bf.data(), bf.size() * 2};
    ASSERT_TRUE(be.decode(p.view(), a).ok());
    for (std::uint16_t h : bf) ASSERT_TRUE(std::isfinite(core::bf16_to_float(h))) << be.name;
  }
}

}  // namespace
}  // namespace tq_rel
