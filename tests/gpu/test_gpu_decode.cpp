// Decode on the GPU against the golden model: strict must reproduce every bit
// of out and LSE, fast must stay within relative L2 1e-3 (fp32 output), for
// both layouts and both FP8 flavours.
#include "decode_setup.hpp"
#include "device_decode.hpp"
#include "gpu_test_support.hpp"

namespace {

using namespace tq_gpu_test;

struct Shape {
  Preset preset;
  int head_dim;
  int block_size;
  int num_kv_heads;
  int group;
  std::vector<int> seq_lens;
  int num_splits;
  DType query_dtype;
  DType out_dtype;
  bool dense_rotation = false;
  LayoutKind layout = LayoutKind::kSoA;
  Fp8Format fp8 = Fp8Format::kE4m3;
};

// Edge grid plus random shapes: head_dim 64/128/256, block 16/32/64, GQA
// 1/3/4/8 (and 32: more heads than one block takes), seq_len 0 .. 40000,
// batch 1 .. 64, split counts that leave empty splits.
std::vector<Shape> shapes(std::uint32_t seed) {
  std::vector<Shape> v;
  v.push_back({Preset::k4BitNc, 128, 16, 8, 4, {1, 37, 4096}, 32, DType::kFloat32, DType::kFloat32});
  v.push_back({Preset::kK8V4, 128, 16, 2, 8, {0, 15, 16, 17, 1000}, 32, DType::kBFloat16, DType::kFloat32});
  v.push_back({Preset::kK3V4Nc, 64, 32, 4, 1, {17, 129, 31, 32, 33}, 32, DType::kFloat16, DType::kFloat16});
  v.push_back({Preset::k3BitNc, 256, 64, 2, 8, {40000, 513}, 32, DType::kFloat32, DType::kFloat32});
  v.push_back({Preset::k4BitNc, 64, 16, 1, 32, {300, 2000}, 7, DType::kFloat32, DType::kBFloat16});
  v.push_back({Preset::kK8V4, 256, 32, 4, 3, {65, 1, 700}, 128, DType::kFloat32, DType::kFloat32});
  v.push_back({Preset::k4BitNc, 256, 16, 4, 4, {257, 3}, 1, DType::kFloat16, DType::kFloat32});
  v.push_back({Preset::kK3V4Nc, 128, 64, 8, 4, {5000}, 32, DType::kFloat32, DType::kFloat32});
  v.push_back({Preset::k4BitNc, 128, 16, 2, 4, {100, 37}, 32, DType::kFloat32, DType::kFloat32, true});
  v.push_back({Preset::k3BitNc, 64, 16, 2, 4, {1000, 0}, 16, DType::kFloat32, DType::kFloat32, true});
  // Strict has two kernels: several warps per split when the one-warp-per-split
  // grid is small (under 4 warps per SM), else one warp per split. Both for every
  // value width: a small grid (FP8 keys, 3-bit values) and a large one.
  v.push_back({Preset::kK8V4, 128, 16, 2, 4, {3000, 77}, 32, DType::kFloat32, DType::kFloat32});
  v.push_back({Preset::k3BitNc, 128, 16, 8, 4, std::vector<int>(24, 300), 32, DType::kBFloat16, DType::kFloat32});
  std::mt19937 rng(seed);
  const Preset presets[] = {Preset::kK8V4, Preset::k4BitNc, Preset::kK3V4Nc, Preset::k3BitNc};
  const int dims[] = {64, 128, 256};
  const int blocks[] = {16, 32, 64};
  const int groups[] = {1, 4, 8};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  for (int i = 0; i < 10; ++i) {
    Shape s{presets[i % 4], dims[(i / 4) % 3], blocks[rng() % 3], 1 + static_cast<int>(rng() % 4), groups[rng() % 3],
            {}, (i % 3 == 0) ? 32 : 1 + static_cast<int>(rng() % 64), dtypes[rng() % 3], dtypes[rng() % 3]};
    const int batch = 1 + static_cast<int>(rng() % 64);
    // Keep the CPU oracle's work bounded: about 400K token x query-head pairs.
    const int budget = 800000 / (batch * s.num_kv_heads * s.group) + 1;
    const int longest = std::min(40000, budget);
    for (int b = 0; b < batch; ++b) s.seq_lens.push_back(static_cast<int>(rng() % (longest + 1)));
    v.push_back(s);
  }
  return v;
}

// The AoS grid: the shapes above in the AoS layout (the FP8 ones alternately
// e4m3 and e4b15), odd block sizes (so that blocks, and with them the 2-byte
// aligned slots, start at every even alignment), and SoA caches of e4b15 keys.
std::vector<Shape> aos_and_e4b15_shapes(std::uint32_t seed) {
  std::vector<Shape> v = shapes(seed);
  int fp8_shapes = 0;
  for (Shape& s : v) {
    s.layout = LayoutKind::kAoS;
    if (s.preset == Preset::kK8V4 && fp8_shapes++ % 2 == 0) s.fp8 = Fp8Format::kE4b15;
  }
  const DType f32 = DType::kFloat32;
  const LayoutKind aos = LayoutKind::kAoS;
  v.push_back({Preset::k4BitNc, 128, 17, 3, 4, {1, 40, 333}, 32, f32, f32, false, aos});
  v.push_back({Preset::kK3V4Nc, 64, 1, 2, 8, {100, 7, 0}, 8, DType::kFloat16, f32, false, aos});
  v.push_back({Preset::k3BitNc, 256, 7, 1, 1, {250}, 4, DType::kBFloat16, DType::kBFloat16, false, aos});
  v.push_back({Preset::k4BitNc, 64, 33, 5, 1, {2000, 64}, 32, f32, f32, false, aos});
  v.push_back({Preset::kK8V4, 128, 5, 2, 4, {77, 3}, 16, f32, f32, false, aos, Fp8Format::kE4b15});
  v.push_back({Preset::kK8V4, 64, 33, 4, 1, {500}, 32, f32, f32, false, aos});
  v.push_back({Preset::kK3V4Nc, 128, 16, 2, 4, {300, 41}, 32, f32, f32, true, aos});  // dense rotation
  v.push_back({Preset::kK8V4, 128, 16, 2, 4, {300, 41}, 32, f32, f32, false, LayoutKind::kSoA, Fp8Format::kE4b15});
  v.push_back({Preset::kK8V4, 256, 16, 1, 8, {3000}, 32, f32, f32, false, LayoutKind::kSoA, Fp8Format::kE4b15});
  return v;
}

DecodeProblem build(const Shape& s, std::uint32_t seed) {
  DecodeProblem p =
      make_problem(s.preset, s.head_dim, s.block_size, s.num_kv_heads, s.group, s.seq_lens, seed, s.layout, s.fp8);
  set_query_dtype(p, s.query_dtype, seed + 1);
  p.num_splits = s.num_splits;
  if (s.dense_rotation) {  // any finite matrix exercises the dense path bit for bit
    std::mt19937 rng(seed + 2);
    std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(float(s.head_dim)));
    p.rotation.resize(std::size_t(s.head_dim) * s.head_dim);
    for (float& x : p.rotation) x = nd(rng);
  }
  return p;
}

class GpuDecode : public ::testing::Test {
 protected:
  void SetUp() override { TQ_REQUIRE_DEVICE(); }
};

// The golden model's out and LSE (returned) and strict's, compared bit for bit.
void expect_strict_bit_exact(const DecodeProblem& p, DType out_dtype, std::vector<std::uint8_t>& ref_out,
                             std::vector<float>& ref_lse) {
  std::vector<std::uint8_t> gpu_out;
  std::vector<float> gpu_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(out_dtype, ref_out, ref_lse)).ok());
  const Status st = cuda::decode_from_host(p.view(), p.args(out_dtype, gpu_out, gpu_lse), cuda::CudaMode::kStrict);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::int64_t at = first_difference(ref_out.data(), gpu_out.data(), ref_out.size());
  EXPECT_EQ(at, -1) << "strict out differs at byte " << at;
  EXPECT_EQ(first_difference(ref_lse.data(), gpu_lse.data(), ref_lse.size() * 4), -1) << "strict lse differs";
}

// A grid of many warps (24 sequences x 8 KV heads x 32 splits), so that strict
// runs its one-warp-per-split kernel; small enough for compute-sanitizer
// (bench/gpu/run_h200.sh puts GpuDecode.LargeGrid* in its sanitizer filter).
TEST_F(GpuDecode, LargeGridStrictBitExact) {
  const Shape s{Preset::k4BitNc, 128, 16, 8, 4, std::vector<int>(24, 200), 32, DType::kFloat32, DType::kFloat32};
  const DecodeProblem p = build(s, 7);
  SCOPED_TRACE(describe(p));
  std::vector<std::uint8_t> ref_out;
  std::vector<float> ref_lse;
  expect_strict_bit_exact(p, DType::kFloat32, ref_out, ref_lse);
}

// One golden-model run per shape, compared with both modes.
void expect_shapes_match(const std::vector<Shape>& grid, std::uint32_t seed) {
  int index = 0;
  for (const Shape& s : grid) {
    const DecodeProblem p = build(s, seed + 17 * index++);
    SCOPED_TRACE(describe(p));
    std::vector<std::uint8_t> ref_out;
    std::vector<float> ref_lse;
    expect_strict_bit_exact(p, s.out_dtype, ref_out, ref_lse);
    Status st;

    // Fast: same problem, fp32 output, relative L2 against the golden output.
    std::vector<std::uint8_t> ref32, fast_out;
    std::vector<float> ref32_lse, fast_lse;
    const std::vector<float> ref = s.out_dtype == DType::kFloat32 ? widen(ref_out, DType::kFloat32) : [&] {
      EXPECT_TRUE(decode_reference(p.view(), p.args(DType::kFloat32, ref32, ref32_lse)).ok());
      return widen(ref32, DType::kFloat32);
    }();
    const char* kernel = cuda::decode_kernel_name(p.view(), p.args(DType::kFloat32, fast_out, fast_lse), cuda::CudaMode::kFast);
    st = cuda::decode_from_host(p.view(), p.args(DType::kFloat32, fast_out, fast_lse), cuda::CudaMode::kFast);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const double err = rel_l2(widen(fast_out, DType::kFloat32), ref);
    double lse_err = 0.0;
    for (std::size_t i = 0; i < ref_lse.size(); ++i) {
      if (std::isinf(ref_lse[i])) {
        EXPECT_EQ(ref_lse[i], fast_lse[i]) << "row " << i;
      } else {
        lse_err = std::max(lse_err, std::fabs(double(fast_lse[i]) - ref_lse[i]));
      }
    }
    std::printf("  %-64s %s rel_l2 %.3g, max |lse err| %.3g\n", describe(p).c_str(), kernel, err, lse_err);
    EXPECT_LE(err, 1e-3);
    EXPECT_LE(lse_err, 1e-2);
  }
}

TEST_F(GpuDecode, StrictBitExactAndFastWithinTolerance) {
  const std::uint32_t seed = 20261129;
  std::printf("seed %u\n", seed);
  expect_shapes_match(shapes(seed), seed);
}

TEST_F(GpuDecode, AosAndE4b15StrictBitExactAndFastWithinTolerance) {
  const std::uint32_t seed = 20261201;
  std::printf("seed %u\n", seed);
  expect_shapes_match(aos_and_e4b15_shapes(seed), seed);
}

// The AoS twin of LargeGridStrictBitExact (the one-warp-per-split kernel), small
// enough for compute-sanitizer.
TEST_F(GpuDecode, AosLargeGridStrictBitExact) {
  Shape s{Preset::k4BitNc, 128, 16, 8, 4, std::vector<int>(24, 200), 32, DType::kFloat32, DType::kFloat32};
  s.layout = LayoutKind::kAoS;
  const DecodeProblem p = build(s, 8);
  SCOPED_TRACE(describe(p));
  std::vector<std::uint8_t> ref_out;
  std::vector<float> ref_lse;
  expect_strict_bit_exact(p, DType::kFloat32, ref_out, ref_lse);
}

// The process's strict row-shift policy for a scope (restored on the way out,
// also when an assertion returns early).
struct StrictShiftScope : tq_gpu_test::PolicyScope<bool> {
  explicit StrictShiftScope(bool uniform_allowed)
      : PolicyScope(cuda::detail::strict_uniform_shift, cuda::detail::set_strict_uniform_shift, uniform_allowed) {}
};

// The strict kernels read the shift of every staged AoS row from its metadata,
// or take one shift for the warp when all of its head's slots share their
// 16-byte phase (a token stride of whole 16-byte units: 8 KV heads of 4bit_nc,
// 3bit_nc and k3v4_nc, 4 of k8v4 at D 128). Both ways, every head, both strict
// kernels (one warp per split, and the split kernel of one sequence).
TEST_F(GpuDecode, AosUniformAndPerRowShiftsBitExact) {
  for (const auto& [preset, uniform_heads, per_row_heads] :
       {std::tuple{Preset::k4BitNc, 8, 4}, std::tuple{Preset::k3BitNc, 8, 2}, std::tuple{Preset::kK3V4Nc, 8, 1},
        std::tuple{Preset::kK8V4, 4, 2}}) {
    for (const int heads : {uniform_heads, per_row_heads}) {
      for (const std::vector<int>& lens : {std::vector<int>{1, 200, 37}, std::vector<int>(48, 90)}) {
        Shape s{preset, 128, 16, heads, 4, lens, 8, DType::kFloat32, DType::kFloat32};
        s.layout = LayoutKind::kAoS;
        const DecodeProblem p = build(s, 900 + heads);
        SCOPED_TRACE(describe(p));
        for (const bool uniform_allowed : {true, false}) {  // false: the per-row instances on every cache
          SCOPED_TRACE(uniform_allowed ? "uniform shift allowed" : "TQ_STRICT_SHIFT=per-row");
          const StrictShiftScope scope(uniform_allowed);
          std::vector<std::uint8_t> ref_out;
          std::vector<float> ref_lse;
          expect_strict_bit_exact(p, DType::kFloat32, ref_out, ref_lse);
        }
      }
    }
  }
}

// AoS slots are 2-byte aligned: a cache that starts 2, 4 or 8 bytes past a
// 16-byte boundary moves every slot to another alignment (FP8 slots of 4k
// bytes then take the 2-byte copies; 4k + 2 slots swap their shifts).
TEST_F(GpuDecode, AosCacheAtAnyEvenOffsetIsBitExact) {
  for (Preset preset : {Preset::k4BitNc, Preset::kK8V4, Preset::k3BitNc}) {
    for (std::size_t offset : {2, 4, 8, 16}) {  // 16: chunked copies of a shifted base
      DecodeProblem p = make_problem(preset, DeviceDecode::kDims, 16, 2, 4, {45, 300}, 31 + unsigned(offset),
                                     LayoutKind::kAoS);
      const std::string what = describe(p) + " cache offset " + std::to_string(offset);
      DeviceDecode d(p, offset);
      CUDA_OK(cudaMemcpy(d.query.p, p.query.data(), p.query.size(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(d.lens.p, p.seq_lens.data(), p.seq_lens.size() * 4, cudaMemcpyHostToDevice));
      const Status st = cuda::decode(d.view(p), d.args, cuda::CudaMode::kStrict, d.workspace, nullptr);
      ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
      CUDA_OK(cudaDeviceSynchronize());
      expect_matches_reference(p, d, cuda::CudaMode::kStrict, what);
    }
  }
}

}  // namespace
