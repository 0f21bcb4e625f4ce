// Every layout number of facts §b, checked at run time (format.hpp and
// block_layout.hpp also static_assert them at compile time).
#include <gtest/gtest.h>

#include <utility>

#include "turboquant/format.hpp"

namespace turboquant {
namespace {

struct Expected {
  Preset preset;
  int head_dim;
  int key_bytes, value_bytes, meta_bytes, slot_bytes;
};

// facts §b table: KDB + VDB + 2*NF per (token, head).
constexpr Expected kTable[] = {
    {Preset::kK8V4, 64, 64, 32, 4, 100},      {Preset::kK8V4, 128, 128, 64, 4, 196},
    {Preset::kK8V4, 256, 256, 128, 4, 388},   {Preset::k4BitNc, 64, 32, 32, 6, 70},
    {Preset::k4BitNc, 128, 64, 64, 6, 134},   {Preset::k4BitNc, 256, 128, 128, 6, 262},
    {Preset::kK3V4Nc, 64, 24, 32, 6, 62},     {Preset::kK3V4Nc, 128, 48, 64, 6, 118},
    {Preset::kK3V4Nc, 256, 96, 128, 6, 230},  {Preset::k3BitNc, 64, 24, 24, 6, 54},
    {Preset::k3BitNc, 128, 48, 48, 6, 102},   {Preset::k3BitNc, 256, 96, 96, 6, 198},
};

TEST(Layout, PerTokenHeadSizesMatchFacts) {
  for (const Expected& e : kTable) {
    volatile int d = e.head_dim;  // force run-time evaluation
    const Format f = preset_format(e.preset, d);
    SCOPED_TRACE(std::string(preset_name(e.preset)) + " D=" + std::to_string(e.head_dim));
    EXPECT_TRUE(validate_format(f).ok());
    EXPECT_EQ(f.key_data_bytes(), e.key_bytes);
    EXPECT_EQ(f.value_data_bytes(), e.value_bytes);
    EXPECT_EQ(f.meta_bytes(), e.meta_bytes);
    EXPECT_EQ(f.slot_bytes(), e.slot_bytes);
    EXPECT_EQ(f.slot_bytes_aligned(), e.slot_bytes);  // no padding for these head_dims
  }
}

TEST(Layout, BlockNumbersMatchMeasuredH200) {
  // D=128, bs=16, Hk=8 (facts §b, measured).
  const struct {
    Preset p;
    std::int64_t meta, block;
    double ratio;
  } rows[] = {{Preset::k4BitNc, 16384, 17152, 3.82},
              {Preset::kK3V4Nc, 14336, 15104, 4.34},
              {Preset::k3BitNc, 12288, 13056, 5.02},
              {Preset::kK8V4, 24576, 25088, 2.61}};
  for (const auto& r : rows) {
    volatile int bs = 16, hk = 8;
    const BlockLayout l{preset_format(r.p, 128), bs, hk};
    EXPECT_TRUE(validate_layout(l).ok());
    EXPECT_EQ(l.meta_offset(), r.meta);
    EXPECT_EQ(l.block_bytes(), r.block);
    EXPECT_EQ(l.used_block_bytes(), r.block);
    EXPECT_NEAR(l.format.compression_vs_bf16(), r.ratio, 0.005);
  }
}

TEST(Layout, OffsetsFollowSoAOrder) {
  const BlockLayout l{preset_format(Preset::k4BitNc, 128), 16, 8};
  EXPECT_EQ(l.key_data_offset(0, 0), 0);
  EXPECT_EQ(l.value_data_offset(0, 0), 64);
  EXPECT_EQ(l.key_data_offset(0, 1), 128);
  EXPECT_EQ(l.key_data_offset(1, 0), 8 * 128);
  // metadata [Hk][NF][bs] fp16 after the data region
  EXPECT_EQ(l.meta_field_offset(0, 0, MetaField::kKeyNorm), 16384);
  EXPECT_EQ(l.meta_field_offset(3, 0, MetaField::kKeyNorm), 16384 + 2 * 3);
  EXPECT_EQ(l.meta_field_offset(0, 0, MetaField::kValueScale), 16384 + 2 * 16);
  EXPECT_EQ(l.meta_field_offset(5, 2, MetaField::kValueZero), 16384 + 2 * ((2 * 3 + 2) * 16 + 5));
  // FP8 keys have no norm field: value scale is field 0.
  const BlockLayout f8{preset_format(Preset::kK8V4, 128), 16, 8};
  EXPECT_EQ(f8.meta_field_offset(0, 1, MetaField::kValueScale), 24576 + 2 * (2 * 16));
  EXPECT_EQ(f8.meta_field_offset(0, 1, MetaField::kValueZero), 24576 + 2 * (3 * 16));
  // The last metadata byte is the last used byte of the block.
  EXPECT_EQ(l.meta_field_offset(15, 7, MetaField::kValueZero) + 2, l.used_block_bytes());
}

TEST(Layout, OffsetsAre64Bit) {
  const BlockLayout l{preset_format(Preset::k4BitNc, 256), 128, 64};
  const std::int64_t beyond = l.block_base(1'000'000);
  EXPECT_GT(beyond, std::int64_t{1} << 32);
  EXPECT_EQ(beyond, std::int64_t{1'000'000} * 128 * 64 * 262);
}

TEST(Layout, CustomFp8HeadDims) {
  // FP8 keys take any multiple of 16 in [32, 512]; D=40 is rejected by name.
  Format f{8, 3, false, 48};
  EXPECT_TRUE(validate_format(f).ok());
  EXPECT_EQ(f.slot_bytes(), 48 + 18 + 4);
  f.head_dim = 40;
  const Status s = validate_format(f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("head_dim = 40"), std::string::npos) << s.message();
}

TEST(Layout, RejectsBadFormatsAndBlocks) {
  EXPECT_FALSE(validate_format(Format{5, 4, true, 128}).ok());
  EXPECT_FALSE(validate_format(Format{4, 2, true, 128}).ok());
  EXPECT_FALSE(validate_format(Format{4, 4, true, 96}).ok());  // MSE keys need a power of two
  EXPECT_TRUE(validate_format(Format{8, 4, false, 96}).ok());  // FP8 keys: any multiple of 16
  EXPECT_TRUE(validate_format(Format{8, 4, false, 512}).ok());
  EXPECT_FALSE(validate_format(Format{8, 4, false, 528}).ok());
  EXPECT_FALSE(validate_format(Format{8, 4, true, 128}).ok());
  const Status s = validate_layout(BlockLayout{preset_format(Preset::k4BitNc, 128), 0, 8});
  EXPECT_NE(s.message().find("block_size = 0"), std::string::npos) << s.message();
  EXPECT_FALSE(validate_layout(BlockLayout{preset_format(Preset::k4BitNc, 128), 16, 0}).ok());
}

TEST(Layout, EveryBlockSizeIsValidForSupportedHeadDims) {
  // With head_dim % 16 == 0 the key and value byte counts are even, so the
  // metadata region always starts at an even offset (vLLM's u16 view) and no
  // slot needs padding: every block size >= 1 is valid, odd ones included.
  for (Preset p : kAllPresets) {
    for (int d : {64, 128, 256}) {
      for (int bs : {1, 3, 16, 17, 64, 128}) EXPECT_TRUE(validate_layout(BlockLayout{preset_format(p, d), bs, 3}).ok());
    }
  }
}

TEST(Layout, PresetNames) {
  EXPECT_EQ(preset_from_name("turboquant_4bit_nc"), Preset::k4BitNc);
  EXPECT_EQ(preset_from_name("k8v4"), Preset::kK8V4);
  EXPECT_EQ(preset_from_name("turboquant_k3v4_nc"), Preset::kK3V4Nc);
  EXPECT_EQ(preset_from_name("3bit_nc"), Preset::k3BitNc);
  EXPECT_FALSE(preset_from_name("turboquant_5bit").has_value());
  EXPECT_FALSE(preset_from_name("").has_value());
}

// visit_bits is the one bit-pair dispatch of the templated CPU kernels: every
// valid (key bits, value bits) reaches the instantiation of exactly that pair.
TEST(Format, VisitBitsReachesTheFormatsOwnPair) {
  int visited = 0;
  for (int key_bits : {3, 4, core::kFp8KeyBits}) {
    for (int value_bits : {3, 4}) {
      const core::Format f = core::make_format(128, key_bits, value_bits);
      ASSERT_EQ(core::format_problem(f), nullptr);
      const auto [kb, vb] = core::visit_bits(f, []<int KB, int VB>() { return std::pair<int, int>{KB, VB}; });
      EXPECT_EQ(kb, key_bits);
      EXPECT_EQ(vb, value_bits);
      ++visited;
    }
  }
  EXPECT_EQ(visited, 6);
}

}  // namespace
}  // namespace turboquant
