// cuda::DecodePlan: a plan runs what decode() runs (strict bitwise, fast within
// 1e-3 of the golden model), refuses a call of another shape naming the field,
// and the per-device caches give each GPU its own numbers.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "decode_setup.hpp"
#include "device_decode.hpp"
#include "gpu_test_support.hpp"

namespace turboquant::cuda::detail {
int device_sm_count();  // gpu/src/launch.hpp (internal): multiprocessors of the current device, cached per device
bool device_has_tensor_copies();  // gpu/src/launch.hpp (internal): sm_90 and newer
}

namespace {

using namespace tq_gpu_test;

// Decodes p through a plan (made once, run twice with new seq_lens and
// queries) and checks each run against decode_reference.
void plan_runs_like_decode(cuda::CudaMode mode) {
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 4, 4, {1000, 37, 2048}, 21);
  DeviceDecode d(p);
  const ConstCacheView dcache = d.view(p);
  cuda::DecodePlan plan;
  const Status ps = cuda::make_decode_plan(dcache, d.args, mode, d.workspace, &plan);
  ASSERT_TRUE(ps.ok()) << ps.to_string();
  ASSERT_TRUE(plan.valid());
  EXPECT_STREQ(plan.kernel_name(), cuda::decode_kernel_name(dcache, d.args, mode));
  EXPECT_GE(plan.splits(), 1);
  EXPECT_LE(plan.workspace_bytes(), d.workspace.bytes);
  for (int call = 0; call < 2; ++call) {
    if (call == 1) {
      p.seq_lens = {999, 5, 0};  // new lengths within the block table's rows
      set_query_dtype(p, DType::kFloat32, 77);
    }
    CUDA_OK(cudaMemcpy(d.lens.p, p.seq_lens.data(), p.seq_lens.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.query.p, p.query.data(), p.query.size(), cudaMemcpyHostToDevice));
    const Status rs = cuda::run(plan, d.args, d.workspace, nullptr);
    ASSERT_TRUE(rs.ok()) << rs.to_string();
    CUDA_OK(cudaDeviceSynchronize());
    expect_matches_reference(p, d, mode, "call " + std::to_string(call));
  }
}

// Strict bitwise, fast within 1e-3, like decode().
TEST(GpuPlan, PlansRunLikeDecode) {
  TQ_REQUIRE_DEVICE();
  for (cuda::CudaMode mode : {cuda::CudaMode::kStrict, cuda::CudaMode::kFast}) {
    SCOPED_TRACE(cuda::mode_name(mode));
    plan_runs_like_decode(mode);
  }
}

void expect_refused(const Status& s, StatusCode code, const char* field) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find("decode plan"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
}

// No device needed: a batch-0 plan is made without pointer queries, and the
// shape match comes before anything touches the device.
TEST(GpuPlan, APlanRefusesAnotherShape) {
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 2, 4, {10, 20}, 3);
  std::vector<std::uint8_t> out;
  std::vector<float> lse;
  const DecodeArgs a = p.args(DType::kFloat32, out, lse);
  cuda::DecodePlan empty;
  EXPECT_FALSE(empty.valid());
  expect_refused(cuda::run(empty, a, {}, nullptr), StatusCode::kInvalidArgument, "empty");

  DecodeArgs zero = a;
  zero.batch = 0;
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::make_decode_plan(p.view(), zero, cuda::CudaMode::kStrict, {}, &plan).ok());
  EXPECT_TRUE(cuda::run(plan, zero, {}, nullptr).ok());  // nothing to do
  expect_refused(cuda::run(plan, a, {}, nullptr), StatusCode::kInvalidArgument, "batch = 2");
  DecodeArgs b = zero;
  b.num_q_heads = 16;
  expect_refused(cuda::run(plan, b, {}, nullptr), StatusCode::kInvalidArgument, "num_q_heads = 16");
  b = zero;
  b.num_splits = 7;
  expect_refused(cuda::run(plan, b, {}, nullptr), StatusCode::kInvalidArgument, "num_splits = 7");
  b = zero;
  b.softmax_scale *= 2.0f;
  expect_refused(cuda::run(plan, b, {}, nullptr), StatusCode::kInvalidArgument, "softmax_scale");
  b = zero;
  b.lse = {};
  expect_refused(cuda::run(plan, b, {}, nullptr), StatusCode::kInvalidArgument, "lse");
  b = zero;
  b.out_dtype = DType::kBFloat16;
  expect_refused(cuda::run(plan, b, {}, nullptr), StatusCode::kInvalidArgument, "out_dtype");

  // A plan is made only for arguments decode() accepts.
  b = a;
  b.num_splits = 0;
  const Status s = cuda::make_decode_plan(p.view(), b, cuda::CudaMode::kStrict, {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(plan.valid());
}

TEST(GpuPlan, ABufferSmallerThanThePlansShapeIsRefused) {
  TQ_REQUIRE_DEVICE();
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 4, 4, {100, 37}, 5);
  DeviceDecode d(p);
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::make_decode_plan(d.view(p), d.args, cuda::CudaMode::kFast, d.workspace, &plan).ok());
  DecodeArgs b = d.args;
  b.out.bytes -= 4;
  expect_refused(cuda::run(plan, b, d.workspace, nullptr), StatusCode::kBufferTooSmall, "out");
  b = d.args;
  b.block_table.data = nullptr;
  expect_refused(cuda::run(plan, b, d.workspace, nullptr), StatusCode::kBufferTooSmall, "block_table");
  expect_refused(cuda::run(plan, d.args, {d.workspace.data, plan.workspace_bytes() - 1}, nullptr),
                 StatusCode::kBufferTooSmall, "workspace");
}

// The launchers' caches (function attributes, occupancy, SM count) are per
// device: on each GPU a decode runs (a kernel whose shared-memory attribute
// was set only on the first device would fail to launch on the second) and is
// exact, and the SM count is that device's.
TEST(GpuPlan, TwoDevicesKeepTheirOwnLaunchCaches) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "needs two CUDA devices (found " << count << ")";
  }
  int first = 0;
  CUDA_OK(cudaGetDevice(&first));
  for (int dev = 0; dev < 2; ++dev) {
    CUDA_OK(cudaSetDevice(dev));
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    EXPECT_EQ(turboquant::cuda::detail::device_sm_count(), sms) << "device " << dev;
    for (cuda::CudaMode mode : {cuda::CudaMode::kStrict, cuda::CudaMode::kFast}) {
      SCOPED_TRACE(std::string("device ") + std::to_string(dev) + " " + cuda::mode_name(mode));
      plan_runs_like_decode(mode);
    }
  }
  CUDA_OK(cudaSetDevice(first));
}

// The fast plan's centroid scale (decode_setup.hpp), host only (no device
// needed): for every vLLM codebook the scaled centroids round to fp16 with a
// worst relative error under 2^-13 (unscaled: 2.7e-4 to 4.0e-4, above 2^-12),
// the search is the same on a second call (the cache) and for a copy, and a
// zero centroid is ignored.
TEST(GpuPlan, CentroidScaleBringsTheCodebooksNearFp16) {
  const auto worst = [](const Codebook& cb, float s) {
    double w = 0.0;
    for (int i = 0; i < cb.size(); ++i) {
      if (cb.centroids[i] == 0.0f) continue;
      const float x = cb.centroids[i] * s;
      w = std::max(w, std::fabs(double(core::fp16_to_float(core::float_to_fp16(x))) - x) / std::fabs(double(x)));
    }
    return w;
  };
  for (int bits : {3, 4}) {
    for (int dims : {64, 128, 256}) {
      SCOPED_TRACE(std::to_string(bits) + "-bit D" + std::to_string(dims));
      const Codebook& cb = vllm_codebook(dims, bits);
      const float s = cuda::detail::fast_centroid_scale(cb);
      EXPECT_GE(s, 1.0f);
      EXPECT_LT(s, 2.0f);
      EXPECT_LT(worst(cb, s), 0x1p-13);
      EXPECT_GT(worst(cb, 1.0f), 2 * worst(cb, s));
      const Codebook copy = cb;
      EXPECT_EQ(cuda::detail::fast_centroid_scale(copy), s);
      EXPECT_EQ(cuda::detail::fast_centroid_scale(cb), s);
    }
  }
  Codebook with_zero = vllm_codebook(128, 3);
  with_zero.centroids[3] = 0.0f;
  const float s = cuda::detail::fast_centroid_scale(with_zero);
  EXPECT_LT(worst(with_zero, s), 0x1p-13);
}

// The wide kernel's loader rule (decode_setup.hpp), host only: by default
// tensor copies for AoS layouts whose strides allow them, cp.async for SoA;
// either loader when forced, where the strides allow tensor copies.
TEST(GpuPlan, WideLoaderRule) {
  using cuda::detail::WideLoader;
  using cuda::detail::wide_takes_tensor_copies;
  for (const Preset preset : kAllPresets) {
    SCOPED_TRACE(preset_name(preset));
    const core::BlockLayout aos8{preset_format(preset, 128, LayoutKind::kAoS), 16, 8};
    const core::BlockLayout soa8{preset_format(preset, 128, LayoutKind::kSoA), 16, 8};
    EXPECT_TRUE(wide_takes_tensor_copies(aos8, WideLoader::kAuto));
    EXPECT_FALSE(wide_takes_tensor_copies(soa8, WideLoader::kAuto));
    EXPECT_TRUE(wide_takes_tensor_copies(soa8, WideLoader::kTensor));
    EXPECT_FALSE(wide_takes_tensor_copies(aos8, WideLoader::kCpAsync));
    // 2 KV heads of AoS slots of 4k + 2 bytes: a token stride off the 16-byte grid.
    const core::BlockLayout aos2{preset_format(preset, 128, LayoutKind::kAoS), 16, 2};
    EXPECT_EQ(wide_takes_tensor_copies(aos2, WideLoader::kTensor), aos2.token_stride() % 16 == 0);
  }
}

// The wide kernel's rule (decode_setup.hpp), host only: by default the
// specialized blocks (every format) where the device has them; either kernel
// when forced.
TEST(GpuPlan, WideKernelRule) {
  using cuda::detail::WideKernel;
  {
    const PolicyScope<WideKernel> scope(cuda::detail::wide_kernel, cuda::detail::set_wide_kernel, WideKernel::kAuto);
    EXPECT_EQ(cuda::detail::wide_kernel_specialized(), cuda::detail::device_has_tensor_copies());
  }
  for (const WideKernel k : {WideKernel::kClassic, WideKernel::kSpecialized}) {
    const PolicyScope<WideKernel> scope(cuda::detail::wide_kernel, cuda::detail::set_wide_kernel, k);
    EXPECT_EQ(cuda::detail::wide_kernel_specialized(), k == WideKernel::kSpecialized);
  }
}

}  // namespace
