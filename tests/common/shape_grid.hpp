// Shape grids for parameterized tests: every combination of preset, head_dim,
// block size and GQA group, numbered in loop order (presets outermost) so that
// each shape keeps the seed it had when the grid was one loop, and named so
// that a failing shape names itself ("4bit_nc_d128_bs16_hk2_gqa4"). The
// layout (SoA, AoS) and the FP8 flavour are a dimension added to a subset of
// a grid by with_aos ("..._gqa4_aos", "k8v4_..._aos_e4b15").
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/random_problem.hpp"

namespace turboquant::testing {

// A preset's name without the "turboquant_" prefix ("4bit_nc"): part of test names.
inline std::string preset_short_name(Preset preset) {
  std::string_view p = preset_name(preset);
  if (p.starts_with("turboquant_")) p.remove_prefix(11);
  return std::string(p);
}

// The name generator of INSTANTIATE_TEST_SUITE_P over presets.
struct PresetName {
  std::string operator()(const ::testing::TestParamInfo<Preset>& info) const { return preset_short_name(info.param); }
};

struct Shape {
  Preset preset = Preset::k4BitNc;
  int head_dim = 128;
  int block_size = 16;
  int num_kv_heads = 2;
  int group = 4;  // Hq / Hk
  std::uint32_t seed = 1;
  int index = 0;  // position in its grid
  LayoutKind layout = LayoutKind::kSoA;
  Fp8Format fp8_format = Fp8Format::kE4m3;  // FP8 keys (k8v4) only

  Format format() const { return core::preset_format(preset, head_dim, layout, fp8_format); }

  // A random problem of this shape over `seq_lens`.
  ProblemSpec spec(std::vector<int> seq_lens) const {
    ProblemSpec s;
    s.format = format();
    s.block_size = block_size;
    s.num_kv_heads = num_kv_heads;
    s.group = group;
    s.seq_lens = std::move(seq_lens);
    s.seed = seed;
    return s;
  }

  std::string name() const {
    return preset_short_name(preset) + "_d" + std::to_string(head_dim) + "_bs" + std::to_string(block_size) + "_hk" +
           std::to_string(num_kv_heads) + "_gqa" + std::to_string(group) + format_suffix(format());
  }
};

// How gtest prints a shape parameter (instead of its bytes).
inline void PrintTo(const Shape& s, std::ostream* os) { *os << s.name() << " seed " << s.seed; }

// The axes of a grid; one value on an axis keeps it fixed.
struct GridAxes {
  std::vector<Preset> presets{std::begin(kAllPresets), std::end(kAllPresets)};
  std::vector<int> head_dims{128};
  std::vector<int> block_sizes{16};
  std::vector<int> groups{4};
  int num_kv_heads = 2;
};

// Every combination of `axes`, presets outermost and groups innermost, with
// seeds first_seed, first_seed + 1, ... in that order.
inline std::vector<Shape> shape_grid(const GridAxes& axes, std::uint32_t first_seed) {
  std::vector<Shape> shapes;
  for (Preset preset : axes.presets) {
    for (int dims : axes.head_dims) {
      for (int bs : axes.block_sizes) {
        for (int group : axes.groups) {
          const int i = static_cast<int>(shapes.size());
          shapes.push_back({preset, dims, bs, axes.num_kv_heads, group, first_seed + static_cast<std::uint32_t>(i), i});
        }
      }
    }
  }
  return shapes;
}

// Cycles one field of a grid's shapes through `values` by position (a
// rotating subset instead of the full product).
template <class T>
std::vector<Shape> rotate(std::vector<Shape> shapes, T Shape::*field, const std::vector<T>& values) {
  for (Shape& s : shapes) s.*field = values[static_cast<std::size_t>(s.index) % values.size()];
  return shapes;
}

// The seeds of with_aos's copies: their grid's seeds plus this, so that they
// stay apart from every SoA seed.
inline constexpr std::uint32_t kAosSeedOffset = 1u << 20;

// `shapes` followed by an AoS copy of about one in `every` of them: the
// layout dimension on a representative subset instead of doubling a grid.
// The picked shapes are a diagonal: writing index = every * q + r, those with
// r == q % every, so that an inner axis of `every` values (or a multiple)
// still sees each of its values in the copies. The copies continue the
// numbering (index) and take the original's seed + kAosSeedOffset. Copies of
// k8v4 shapes alternate the FP8 flavour, e4b15 first (what vLLM writes below
// sm_89, in the AoS layout only; the SoA grids run e4m3); with every == 1
// each k8v4 shape gets both.
inline std::vector<Shape> with_aos(std::vector<Shape> shapes, int every = 1) {
  const std::size_t n = shapes.size();
  int fp8_copies = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int index = shapes[i].index;
    if (index % every != (index / every) % every) continue;
    Shape s = shapes[i];
    s.layout = LayoutKind::kAoS;
    s.seed += kAosSeedOffset;
    std::vector<Fp8Format> flavours{Fp8Format::kE4m3};
    if (s.preset == Preset::kK8V4) {
      if (every == 1) {
        flavours = {Fp8Format::kE4b15, Fp8Format::kE4m3};
      } else if (fp8_copies++ % 2 == 0) {
        flavours = {Fp8Format::kE4b15};
      }
    }
    for (Fp8Format f : flavours) {
      s.fp8_format = f;
      s.index = static_cast<int>(shapes.size());
      shapes.push_back(s);
      s.seed += kAosSeedOffset;  // a second flavour: its own seed
    }
  }
  return shapes;
}

// The name generator of INSTANTIATE_TEST_SUITE_P over shapes.
struct ShapeName {
  std::string operator()(const ::testing::TestParamInfo<Shape>& info) const { return info.param.name(); }
};

// Prints a test's seed so that a failure can be replayed.
inline std::uint32_t announce_seed(std::uint32_t seed) {
  std::printf("[ seed ] %u\n", seed);
  return seed;
}

// The fixture of a test over one shape of a grid; each suite is an alias
// (`using CpuDecodeEdgeGrid = ShapeTest;`) instantiated with its own grid.
class ShapeTest : public ::testing::TestWithParam<Shape> {
 protected:
  const Shape& shape() const { return GetParam(); }
  // The random problem of this shape over `seq_lens`, its seed printed.
  Problem problem(std::vector<int> seq_lens) const {
    announce_seed(shape().seed);
    return make_problem(shape().spec(std::move(seq_lens)));
  }
};

}  // namespace turboquant::testing
