// Shape grids for parameterized tests: every combination of preset, head_dim,
// block size and GQA group, numbered in loop order (presets outermost) so that
// each shape keeps the seed it had when the grid was one loop, and named so
// that a failing shape names itself ("4bit_nc_d128_bs16_hk2_gqa4").
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

  Format format() const { return core::preset_format(preset, head_dim); }

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
           std::to_string(num_kv_heads) + "_gqa" + std::to_string(group);
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
