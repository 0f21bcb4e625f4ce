// The strided offsets of BlockLayout and the PartialLayout of the decode
// workspace, checked against the per-(token, head) definitions over a grid of
// layouts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "turboquant/core/block_layout.hpp"
#include "turboquant/core/partial_layout.hpp"

namespace turboquant::core {
namespace {

// Every preset at every supported head_dim, odd and even block sizes and head
// counts, in one layout kind.
template <class Fn>
void for_each_layout(Fn&& fn, LayoutKind kind = LayoutKind::kSoA) {
  for (const Preset p : kAllPresets) {
    for (const int d : {32, 64, 128, 256, 512}) {
      for (const int bs : {1, 2, 16, 17, 64}) {
        for (const int hk : {1, 2, 3, 8}) {
          const BlockLayout l{preset_format(p, d, kind), bs, hk};
          if (layout_problem(l) != nullptr) continue;
          SCOPED_TRACE(std::string(preset_name(p)) + " " + layout_name(kind) + " D=" + std::to_string(d) +
                       " bs=" + std::to_string(bs) + " Hk=" + std::to_string(hk));
          fn(l);
        }
      }
    }
  }
}

TEST(LayoutStrides, EqualThePerTokenHeadOffsets) {
  int layouts = 0;
  for_each_layout([&](const BlockLayout& l) {
    ++layouts;
    for (int h = 0; h < l.num_kv_heads; ++h) {
      for (int t = 0; t < l.block_size; ++t) {
        ASSERT_EQ(l.head_key_offset(h) + t * l.token_stride(), l.key_data_offset(t, h));
        ASSERT_EQ(l.head_value_offset(h) + t * l.token_stride(), l.value_data_offset(t, h));
        // The definitions before the strided forms existed (docs/FORMAT.md).
        ASSERT_EQ(l.key_data_offset(t, h), (std::int64_t{t} * l.num_kv_heads + h) * l.format.data_bytes());
        for (const MetaField f : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
          if (f == MetaField::kKeyNorm && l.format.fp8_keys()) continue;
          const std::int64_t element =
              (std::int64_t{h} * l.format.meta_fields() + l.format.field_index(f)) * l.block_size + t;
          ASSERT_EQ(l.meta_field_offset(t, h, f), l.meta_offset() + 2 * element);
          ASSERT_EQ(l.meta_field_base(h, f) + l.meta_token_stride() * t, l.meta_field_offset(t, h, f));
          ASSERT_EQ(l.meta_base(h, l.format.field_index(f)), l.meta_field_base(h, f));
        }
      }
    }
    // The stored fields of all heads tile the metadata region without gaps.
    for (int i = 0; i < l.num_kv_heads * l.format.meta_fields(); ++i) {
      ASSERT_EQ(l.meta_base(i / l.format.meta_fields(), i % l.format.meta_fields()),
                l.meta_offset() + std::int64_t{2} * l.block_size * i);
    }
    ASSERT_EQ(l.meta_base(l.num_kv_heads, 0), l.used_block_bytes());
  });
  EXPECT_GT(layouts, 100);
}

// AoS: the slot of (t, h) starts at (t * Hk + h) * slot_bytes and holds
// [key codes | norm | value codes | scale | zero] (vLLM 0.33's store); every
// byte of a block belongs to exactly one field of one slot.
TEST(LayoutStrides, AosSlotsAreCOrderAndTileTheBlock) {
  int layouts = 0;
  for_each_layout(
      [&](const BlockLayout& l) {
        ++layouts;
        const Format& f = l.format;
        const std::int64_t slot_bytes = f.slot_bytes();
        ASSERT_EQ(l.block_bytes(), std::int64_t{l.block_size} * l.num_kv_heads * slot_bytes);
        std::vector<int> owners(static_cast<std::size_t>(l.block_bytes()), 0);
        const auto own = [&](std::int64_t at, int n) {
          for (int i = 0; i < n; ++i) ++owners[static_cast<std::size_t>(at + i)];
        };
        for (int t = 0; t < l.block_size; ++t) {
          for (int h = 0; h < l.num_kv_heads; ++h) {
            const std::int64_t slot = (std::int64_t{t} * l.num_kv_heads + h) * slot_bytes;
            const int key_packed = f.key_data_bytes() + (f.fp8_keys() ? 0 : 2);  // vLLM's key_packed_size
            ASSERT_EQ(l.key_data_offset(t, h), slot);
            ASSERT_EQ(l.value_data_offset(t, h), slot + key_packed);
            ASSERT_EQ(l.head_key_offset(h) + t * l.token_stride(), slot);
            ASSERT_EQ(l.head_value_offset(h) + t * l.token_stride(), slot + key_packed);
            ASSERT_EQ(l.meta_field_offset(t, h, MetaField::kValueScale), slot + key_packed + f.value_data_bytes());
            ASSERT_EQ(l.meta_field_offset(t, h, MetaField::kValueZero), slot + key_packed + f.value_data_bytes() + 2);
            for (const MetaField m : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
              if (m == MetaField::kKeyNorm && f.fp8_keys()) continue;
              ASSERT_EQ(l.meta_field_base(h, m) + l.meta_token_stride() * t, l.meta_field_offset(t, h, m));
              own(l.meta_field_offset(t, h, m), 2);
            }
            if (!f.fp8_keys()) {
              ASSERT_EQ(l.meta_field_offset(t, h, MetaField::kKeyNorm), slot + f.key_data_bytes());
            }
            own(l.key_data_offset(t, h), f.key_data_bytes());
            own(l.value_data_offset(t, h), f.value_data_bytes());
          }
        }
        for (std::size_t i = 0; i < owners.size(); ++i) ASSERT_EQ(owners[i], 1) << "byte " << i;
      },
      LayoutKind::kAoS);
  EXPECT_GT(layouts, 100);
}

// The same slot contents in both layouts: sizes do not depend on the layout.
TEST(LayoutStrides, BothLayoutsHaveTheSameSlotAndBlockSizes) {
  for (const Preset p : kAllPresets) {
    for (const int d : {64, 128, 256}) {
      const BlockLayout soa{preset_format(p, d), 16, 8};
      const BlockLayout aos{preset_format(p, d, LayoutKind::kAoS), 16, 8};
      EXPECT_EQ(soa.block_bytes(), aos.block_bytes());
      EXPECT_EQ(soa.format.slot_bytes(), aos.format.slot_bytes());
      EXPECT_EQ(aos.format.record_bytes(), aos.format.slot_bytes());
      EXPECT_EQ(soa.format.record_bytes(), soa.format.data_bytes());
      EXPECT_NE(soa.format, aos.format);
    }
  }
}

// The worked examples of include/turboquant/format.hpp and docs/FORMAT.md §6, §7.
TEST(LayoutStrides, DocumentedExamplesOfBothLayouts) {
  constexpr BlockLayout aos{preset_format(Preset::k4BitNc, 128, LayoutKind::kAoS), 16, 8};
  static_assert(aos.key_data_offset(5, 2) == 5628 && aos.value_data_offset(5, 2) == 5694);
  static_assert(aos.meta_field_offset(5, 2, MetaField::kKeyNorm) == 5692);
  static_assert(aos.meta_field_offset(5, 2, MetaField::kValueScale) == 5758);
  static_assert(aos.meta_field_offset(5, 2, MetaField::kValueZero) == 5760);
  static_assert(aos.key_data_offset(5, 3) == 5762 && aos.block_base(3) == 51456);
  constexpr BlockLayout soa{preset_format(Preset::k4BitNc, 128), 16, 8};
  static_assert(soa.key_data_offset(5, 2) == 5376 && soa.value_data_offset(5, 2) == 5440);
  static_assert(soa.meta_field_offset(5, 2, MetaField::kKeyNorm) == 16586);
  static_assert(soa.meta_field_offset(5, 2, MetaField::kValueScale) == 16618);
  static_assert(soa.meta_field_offset(5, 2, MetaField::kValueZero) == 16650);
  constexpr Format k8v4 = preset_format(Preset::kK8V4, 128, LayoutKind::kAoS);
  static_assert(k8v4.value_record_offset() == 128 && k8v4.aos_meta_offset(0) == 192 && k8v4.aos_meta_offset(1) == 194);
  SUCCEED();
}

TEST(LayoutStrides, MakeFormatGivesThePresetSizes) {
  for (const Preset p : kAllPresets) {
    for (const int d : {64, 128, 256}) {
      const Format f = preset_format(p, d);
      const Format g = make_format(d, f.key_bits, f.value_bits, f.norm_correction);
      EXPECT_EQ(f, g);
      EXPECT_EQ(make_format(d, f.key_bits, f.value_bits).data_bytes(), f.data_bytes());
      EXPECT_EQ(make_format(d, f.key_bits, f.value_bits).slot_bytes(), f.slot_bytes());
    }
  }
  constexpr Format f = make_format(128, 3, 4);
  static_assert(f.data_bytes() == 112 && f.key_data_bytes() == 48);
}

TEST(PartialLayout, IndexesEveryRowAndSplitOnceInRowMajorOrder) {
  for (const int pitch : {32, 64, 128, 144, 512}) {
    for (const int stride : {1, 2, 7, 32}) {
      const PartialLayout pl{pitch, stride, 5};
      std::int64_t expected = 0;
      for (std::int64_t row = 0; row < pl.rows; ++row) {
        for (int s = 0; s < stride; ++s, ++expected) {
          // The hand-written forms the kernels used: (row * num_splits + split) * D and * 2.
          ASSERT_EQ(pl.index(row, s), expected);
          ASSERT_EQ(pl.acc_offset(row, s), (row * stride + s) * pitch);
          ASSERT_EQ(pl.ml_offset(row, s), (row * stride + s) * 2);
          if (row > 0) {
            ASSERT_EQ(pl.acc_offset(row, s) - pl.acc_offset(row - 1, s), pl.acc_row_stride());
          }
        }
      }
      ASSERT_EQ(pl.acc_bytes(), expected * pitch * 4);
      ASSERT_EQ(pl.ml_bytes(), expected * 8);
    }
  }
}

// gpu/src/decode_api.cpp's workspace: the accumulators, then the (max, sum)
// pairs at the next 256-byte boundary, the total rounded up to 256 bytes too.
TEST(PartialLayout, WorkspaceRegionsAre256ByteAligned) {
  const auto align = [](std::int64_t x) { return (x + 255) / 256 * 256; };
  for (const int batch : {1, 3, 64}) {
    for (const int heads : {1, 7, 32}) {
      for (const int splits : {1, 5, 256}) {
        for (const int d : {64, 128, 256}) {
          const PartialLayout pl{d, splits, std::int64_t{batch} * heads};
          const std::int64_t partials = std::int64_t{batch} * heads * splits;
          ASSERT_EQ(pl.ml_region_offset(), align(partials * d * 4));
          ASSERT_EQ(pl.total_bytes(), align(partials * d * 4) + align(partials * 8));
          ASSERT_EQ(pl.ml_region_offset() % PartialLayout::kRegionAlign, 0);
        }
      }
    }
  }
  const PartialLayout empty{128, 4, 0};
  EXPECT_EQ(empty.total_bytes(), 0);
}

TEST(PartialLayout, SizesReportOverflow) {
  const PartialLayout huge{512, 1 << 30, std::int64_t{1} << 40};
  EXPECT_EQ(huge.acc_bytes(), -1);
  EXPECT_EQ(huge.ml_bytes(), -1);
  EXPECT_EQ(huge.total_bytes(), -1);
  const PartialLayout ml_too_big{1, 1, std::int64_t{1} << 60};  // acc 2^62 bytes fits, ml 2^63 does not
  EXPECT_EQ(ml_too_big.acc_bytes(), std::int64_t{1} << 62);
  EXPECT_EQ(ml_too_big.ml_bytes(), -1);
  EXPECT_EQ(ml_too_big.total_bytes(), -1);
  const PartialLayout sum_too_big{2, 1, std::int64_t{1} << 59};  // each region 2^62 bytes, together 2^63
  EXPECT_EQ(sum_too_big.acc_bytes(), std::int64_t{1} << 62);
  EXPECT_EQ(sum_too_big.ml_bytes(), std::int64_t{1} << 62);
  EXPECT_EQ(sum_too_big.total_bytes(), -1);
}

}  // namespace
}  // namespace turboquant::core
