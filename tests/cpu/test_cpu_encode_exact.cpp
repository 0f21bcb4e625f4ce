// encode_cpu must write the bytes encode_reference writes, and no others: the
// whole cache (pre-filled with random bytes) is compared, for every ISA and
// thread count, preset, head_dim, block size and input dtype, plus the rows
// whose arithmetic has corners (zero rows, constant rows, signed zeros, fp16
// overflow and subnormals, non-finite rows with check_finite off, FP8 keys at
// the e4b15 clamp). Both layouts (issue 12): AoS on a diagonal subset of the
// big grid (with_aos) and on every shape of the small ones, k8v4 with both
// FP8 flavours.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "common/random_problem.hpp"
#include "common/shape_grid.hpp"
#include "cpu_test_util.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant {
namespace {

using testing::all_cpu_runs;
using testing::CpuRun;

struct EncodeCase {
  Format format;
  int block_size = 16;
  int num_kv_heads = 2;
  std::int64_t num_tokens = 40;
  DType dtype = DType::kFloat32;
  std::uint32_t seed = 1;
  bool check_finite = true;
  const std::vector<float>* rotation = nullptr;
  const Codebook* codebook = nullptr;

  std::string name() const {
    return std::string("K") + std::to_string(format.key_bits) + "V" + std::to_string(format.value_bits) + "_D" +
           std::to_string(format.head_dim) + "_bs" + std::to_string(block_size) + "_hk" +
           std::to_string(num_kv_heads) + "_n" + std::to_string(num_tokens) + "_" + dtype_name(dtype) +
           testing::format_suffix(format) + "_seed" + std::to_string(seed) + (rotation ? "_rot" : "") +
           (codebook ? "_cb" : "");
  }
};

// K/V element values, as fp32 (rounded to the dtype first).
struct Inputs {
  std::vector<float> k, v;
};

void expect_exact(const EncodeCase& c, const Inputs& in, const std::vector<CpuRun>& runs) {
  const std::string config = c.name();
  SCOPED_TRACE(config);
  const BlockLayout layout{c.format, c.block_size, c.num_kv_heads};
  const std::int64_t slots_needed = c.num_tokens + 5;
  const std::int64_t num_blocks = (slots_needed + c.block_size - 1) / c.block_size + 1;
  std::mt19937_64 rng(c.seed);
  // Shuffled slots; every 7th token is padding (-1).
  std::vector<std::int64_t> slots(static_cast<std::size_t>(num_blocks * c.block_size));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<std::size_t>(c.num_tokens));
  for (std::size_t i = 3; i < slots.size(); i += 7) slots[i] = -1;
  std::vector<std::uint8_t> initial(static_cast<std::size_t>(num_blocks * layout.block_bytes()));
  for (auto& byte : initial) byte = static_cast<std::uint8_t>(rng());

  const std::vector<std::uint8_t> kb = testing::as_dtype_bytes(in.k, c.dtype);
  const std::vector<std::uint8_t> vb = testing::as_dtype_bytes(in.v, c.dtype);
  EncodeArgs a = testing::host_encode_args(testing::bytes_of(kb), testing::bytes_of(vb), c.dtype, slots);
  a.check_finite = c.check_finite;
  a.codebook = c.codebook;
  if (c.rotation) a.rotation = {c.rotation->data(), c.rotation->size() * 4};

  std::vector<std::uint8_t> want = initial;
  ASSERT_TRUE(encode_reference(CacheView{layout, want.data(), num_blocks}, a).ok());
  for (const CpuRun& run : runs) {
    std::vector<std::uint8_t> got = initial;
    const Status s = encode_cpu(CacheView{layout, got.data(), num_blocks}, a, CpuOptions{run.threads, run.isa});
    ASSERT_TRUE(s.ok()) << run.name() << ": " << s.to_string();
    const std::int64_t bad = testing::first_bit_difference(got, want);
    if (bad >= 0) {
      const std::int64_t block = bad / layout.block_bytes();
      const std::int64_t within = bad % layout.block_bytes();
      const char* region = layout.aos() ? ", AoS slot" : (within >= layout.meta_offset() ? ", metadata" : ", data");
      ADD_FAILURE() << run.name() << ": cache byte " << bad << " (block " << block << ", offset " << within
                    << region << ") = " << int{got[bad]} << ", reference " << int{want[bad]};
      testing::dump_bytes(config + "_" + run.name(), "keys", kb.data(), kb.size());
      testing::dump_bytes(config + "_" + run.name(), "values", vb.data(), vb.size());
      return;
    }
  }
}

Inputs random_inputs(const EncodeCase& c, float key_scale = 1.0f) {
  const std::size_t n = static_cast<std::size_t>(c.num_tokens) * c.num_kv_heads * c.format.head_dim;
  std::mt19937_64 rng(c.seed * 7919u + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Inputs in;
  in.k.resize(n);
  in.v.resize(n);
  for (float& x : in.k) x = normal(rng) * key_scale;
  for (float& x : in.v) x = normal(rng);
  return in;
}

using testing::announce_seed;
using testing::Shape;
using testing::shape_grid;
using testing::ShapeName;

// The fixture of the shape grids: the case of this test's shape (its seed printed).
class EncodeShapeTest : public testing::ShapeTest {
 protected:
  EncodeCase shape_case(std::int64_t num_tokens) const {
    EncodeCase c;
    c.format = shape().format();
    c.block_size = shape().block_size;
    c.num_kv_heads = shape().num_kv_heads;
    c.num_tokens = num_tokens;
    c.seed = announce_seed(shape().seed);
    return c;
  }
};

// Preset x head_dim x block size; Hk and the input dtype rotate with the seed.
std::vector<Shape> preset_dims_block_sizes() {
  std::vector<Shape> shapes =
      testing::with_aos(shape_grid({.head_dims = {64, 128, 256}, .block_sizes = {1, 16, 64}}, 20000), 2);
  for (Shape& s : shapes) s.num_kv_heads = 1 + static_cast<int>(s.seed % 3);
  return shapes;
}
using CpuEncodeGrid = EncodeShapeTest;
TEST_P(CpuEncodeGrid, PresetsHeadDimsBlockSizesDtypes) {
  EncodeCase c = shape_case(45);
  c.dtype = std::vector<DType>{DType::kFloat32, DType::kFloat16, DType::kBFloat16}[c.seed % 3];
  expect_exact(c, random_inputs(c), all_cpu_runs());
}
INSTANTIATE_TEST_SUITE_P(Grid, CpuEncodeGrid, ::testing::ValuesIn(preset_dims_block_sizes()), ShapeName());

TEST(CpuEncodeExact, ManyTokensAllDtypes) {
  std::uint32_t seed = announce_seed(21000);
  const auto runs = all_cpu_runs();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    EncodeCase c;
    c.format = preset_format(Preset::k4BitNc, 128);
    c.num_kv_heads = 8;
    c.num_tokens = 700;
    c.dtype = t;
    c.seed = seed++;
    expect_exact(c, random_inputs(c, 3.0f), runs);
  }
  // AoS: bf16 input (what vLLM stores), another preset.
  EncodeCase c;
  c.format = preset_format(Preset::kK3V4Nc, 128, LayoutKind::kAoS);
  c.num_kv_heads = 8;
  c.num_tokens = 700;
  c.dtype = DType::kBFloat16;
  c.seed = seed++;
  expect_exact(c, random_inputs(c, 3.0f), runs);
}

// Rows whose arithmetic has corners.
using CpuEncodeSpecialRows = EncodeShapeTest;
TEST_P(CpuEncodeSpecialRows, Exact) {
  const EncodeCase c = shape_case(12);
  Inputs in = random_inputs(c);
  const int d = 64;
  auto row = [&](std::vector<float>& x, int token) { return x.begin() + token * d; };
  std::fill(row(in.k, 0), row(in.k, 0) + d, 0.0f);  // zero key: norm 0
  std::fill(row(in.v, 0), row(in.v, 0) + d, 0.0f);  // zero values: scale floor
  std::fill(row(in.v, 1), row(in.v, 1) + d, 2.5f);  // constant values
  for (int i = 0; i < d; ++i) in.v[2 * d + i] = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : 1.0f + i);  // +-0 min
  for (int i = 0; i < d; ++i) in.v[4 * d + i] = (i % 2 == 0) ? 0.0f : -0.0f;                       // all zeros, mixed
  for (int i = 0; i < d; ++i) in.v[5 * d + i] = (i == 7) ? -0.0f : -1.0f - i;                    // +-0 max
  for (int i = 0; i < d; ++i) in.k[6 * d + i] = 1e5f * (i % 2 ? 1.0f : -3.0f);                  // norm > fp16 max
  for (int i = 0; i < d; ++i) in.v[6 * d + i] = 1e6f * (i - 30);                                // scale > fp16 max
  for (int i = 0; i < d; ++i) in.k[7 * d + i] = 1e-6f * (i + 1);                                // tiny norm: fp16 subnormal
  for (int i = 0; i < d; ++i) in.v[7 * d + i] = 1e-7f * i;                                      // tiny scale
  for (int i = 0; i < d; ++i) in.k[8 * d + i] = 3e20f * (i % 5 - 2);                            // dot16 overflows
  for (int i = 0; i < d; ++i) in.v[8 * d + i] = (i % 2 ? 3e38f : -3e38f);                        // max - min overflows
  for (int i = 0; i < d; ++i) in.k[9 * d + i] = 500.0f * (i % 7 - 3);                           // FP8 saturation
  // Keys at the e4b15 clamp (1.75), around its rounding steps and subnormals
  // (tokens 3 and 10 are padding rows: see expect_exact).
  const float near_clamp[] = {1.75f, 1.7499999f, 1.7500001f, 1.8125f, 1.875f, 1.6875f, 1.71875f, 1.78125f,
                              2.0f,  448.0f,     6.1035156e-05f, 3.0517578e-05f, 7.6293945e-06f, 1.1444092e-05f};
  for (int i = 0; i < d; ++i) in.k[11 * d + i] = (i % 2 ? -1.0f : 1.0f) * near_clamp[i % std::size(near_clamp)];
  for (int i = 0; i < d; ++i) in.k[1 * d + i] = std::ldexp(1.0f + static_cast<float>(i) / 64, i % 24 - 20);  // 2^-20 .. 2^4
  expect_exact(c, in, all_cpu_runs({1, 2}));
}
INSTANTIATE_TEST_SUITE_P(Presets, CpuEncodeSpecialRows,
                         ::testing::ValuesIn(testing::with_aos(shape_grid({.head_dims = {64}, .num_kv_heads = 1}, 22000))),
                         ShapeName());

using CpuEncodeNonFiniteRows = EncodeShapeTest;
TEST_P(CpuEncodeNonFiniteRows, WithChecksOff) {
  EncodeCase c = shape_case(20);
  c.check_finite = false;
  Inputs in = random_inputs(c);
  in.k[5] = std::numeric_limits<float>::infinity();
  in.v[128 * 3 + 9] = -std::numeric_limits<float>::infinity();
  in.k[128 * 10 + 1] = std::numeric_limits<float>::quiet_NaN();
  in.v[128 * 13] = std::numeric_limits<float>::quiet_NaN();
  expect_exact(c, in, all_cpu_runs({1, 2}));
}
INSTANTIATE_TEST_SUITE_P(Presets, CpuEncodeNonFiniteRows, ::testing::ValuesIn(testing::with_aos(shape_grid({}, 23000))),
                         ShapeName());

using CpuEncodeDenseRotation = EncodeShapeTest;
TEST_P(CpuEncodeDenseRotation, AndCustomCodebooks) {
  const auto runs = all_cpu_runs({1, 2});
  EncodeCase c = shape_case(30);
  std::mt19937 rng(c.seed);
  std::normal_distribution<float> normal(0.0f, 0.125f);
  std::vector<float> rotation(64 * 64);
  for (float& x : rotation) x = normal(rng);
  c.rotation = &rotation;
  expect_exact(c, random_inputs(c), runs);
  c.rotation = nullptr;

  // A sorted custom codebook, and one whose midpoints are not sorted (a
  // Codebook filled by hand: bucketize must count, not binary-search).
  const int size = 1 << c.format.key_bits;
  std::vector<float> sorted(size);
  for (int i = 0; i < size; ++i) sorted[i] = -0.3f + 0.6f * static_cast<float>(i * i) / float(size * size);
  Codebook cb;
  ASSERT_TRUE(make_codebook(c.format.key_bits, sorted, &cb).ok());
  c.codebook = &cb;
  expect_exact(c, random_inputs(c), runs);
  Codebook unsorted = cb;
  std::swap(unsorted.midpoints[1], unsorted.midpoints[size - 3]);
  unsorted.centroids[0] = 0.2f;
  c.codebook = &unsorted;
  expect_exact(c, random_inputs(c), runs);
}
INSTANTIATE_TEST_SUITE_P(
    Presets, CpuEncodeDenseRotation,
    ::testing::ValuesIn(testing::with_aos(shape_grid(
        {.presets = {Preset::k4BitNc, Preset::kK3V4Nc, Preset::k3BitNc}, .head_dims = {64}}, 24000))),
    ShapeName());

}  // namespace
}  // namespace turboquant
