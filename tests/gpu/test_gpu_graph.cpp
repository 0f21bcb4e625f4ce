// The device entry points under CUDA-graph capture: one capture, replays with
// new seq_lens, queries and cache contents, each checked against the golden
// model (strict bitwise, fast within 1e-3). Also the host-side checks.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "../../gpu/src/cuda_check.hpp"  // TQ_CUDA_TRY (internal)
#include "device_decode.hpp"
#include "gpu_test_support.hpp"

namespace {

using namespace tq_gpu_test;

// layout, kv_heads: AoS with 8 KV heads takes the tensor copies and, on sm_90,
// the cluster launch of the head pacing (cluster_pace.cuh).
void replay_and_check(cuda::CudaMode mode, LayoutKind layout = LayoutKind::kSoA, int kv_heads = 4) {
  // Fixed capacity: batch 4, up to 3000 tokens per sequence.
  const std::vector<int> capacity = {3000, 3000, 3000, 3000};
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, kv_heads, 4, capacity, 99, layout);
  DeviceDecode d(p);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  const ConstCacheView dcache = d.view(p);
  DecodeArgs a = d.args;
  const MutableBuffer ws = d.workspace;

  // Warm-up call outside the capture (module load, function attributes).
  CUDA_OK(cudaMemcpy(d.lens.p, p.seq_lens.data(), p.seq_lens.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.query.p, p.query.data(), p.query.size(), cudaMemcpyHostToDevice));
  ASSERT_TRUE(cuda::decode(dcache, a, mode, ws, stream).ok());
  CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status cs = cuda::decode(dcache, a, mode, ws, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(cs.ok()) << cs.to_string();
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::mt19937 rng(5);
  for (int replay = 0; replay < 3; ++replay) {
    for (int& len : p.seq_lens) len = static_cast<int>(rng() % 3001);
    p.seq_lens[replay % 4] = replay == 0 ? 0 : p.seq_lens[replay % 4];
    set_query_dtype(p, DType::kFloat32, 100 + replay);
    if (replay == 2) {  // new cache contents too
      DecodeProblem q = make_problem(Preset::k4BitNc, 128, 16, kv_heads, 4, capacity, 1234, layout);
      p.cache = q.cache;
      CUDA_OK(cudaMemcpy(d.cache.p, p.cache.data(), p.cache.size(), cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMemcpy(d.lens.p, p.seq_lens.data(), p.seq_lens.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.query.p, p.query.data(), p.query.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    expect_matches_reference(p, d, mode, "replay " + std::to_string(replay));
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(GpuGraph, StrictDecodeReplays) {
  TQ_REQUIRE_DEVICE();
  replay_and_check(cuda::CudaMode::kStrict);
}

TEST(GpuGraph, FastDecodeReplays) {
  TQ_REQUIRE_DEVICE();
  replay_and_check(cuda::CudaMode::kFast);
}

TEST(GpuGraph, FastAosDecodeReplaysWithPacedClusters) {
  TQ_REQUIRE_DEVICE();
  replay_and_check(cuda::CudaMode::kFast, LayoutKind::kAoS, 8);
}

TEST(GpuApi, HostChecksNameTheBadArgument) {
  // No device needed: can_implement reads no device memory.
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 2, 4, {10}, 1);
  std::vector<std::uint8_t> out;
  std::vector<float> lse;
  DecodeArgs a = p.args(DType::kFloat32, out, lse);
  EXPECT_TRUE(cuda::decode_can_implement(p.view(), a, cuda::CudaMode::kFast).ok());
  a.num_splits = 0;
  Status s = cuda::decode_can_implement(p.view(), a, cuda::CudaMode::kFast);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_splits"), std::string::npos) << s.message();
  a = p.args(DType::kFloat32, out, lse);
  a.out.bytes -= 4;
  s = cuda::decode_can_implement(p.view(), a, cuda::CudaMode::kStrict);
  EXPECT_EQ(s.code(), StatusCode::kBufferTooSmall);
  EXPECT_NE(s.message().find("out"), std::string::npos) << s.message();
  DecodeProblem q = make_problem(Preset::kK8V4, 96, 16, 2, 4, {10}, 1);
  a = q.args(DType::kFloat32, out, lse);
  EXPECT_EQ(cuda::decode_can_implement(q.view(), a, cuda::CudaMode::kStrict).code(), StatusCode::kUnsupported);
  EXPECT_EQ(cuda::decode_workspace_bytes(0, 8, 32, 128), 0u);
  EXPECT_GE(cuda::decode_workspace_bytes(2, 8, 32, 128), std::size_t(2) * 8 * 32 * 130 * 4);
  EXPECT_STREQ(cuda::decode_kernel_name(p.view(), p.args(DType::kFloat32, out, lse), cuda::CudaMode::kStrict),
               "cuda:strict");
}

// F10 (docs/RELIABILITY.md): the CUDA host checks use the core's checked byte
// counts, so sizes that overflow are errors instead of wrapping to something
// small that null pointers would satisfy. No device needed.
TEST(GpuApi, OverflowingSizesAreRejectedNotWrapped) {
  const BlockLayout l{preset_format(Preset::k4BitNc, 128), 16, 8};
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(2 * l.block_bytes()));
  EncodeArgs e;
  e.dtype = DType::kBFloat16;
  e.num_tokens = std::int64_t{1} << 61;  // keys need 2^61 x 8 x 128 x 2 bytes: wraps to 0 in size_t
  Status s = cuda::encode_can_implement(ConstCacheView{l, cache.data(), 2}, e);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("keys"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2^63"), std::string::npos) << s.message();

  // A cache view whose num_blocks x block_bytes exceeds 2^63 (backed by 2 blocks:
  // validation never touches the bytes).
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 2, 4, {10}, 1);
  std::vector<std::uint8_t> out;
  std::vector<float> lse;
  const DecodeArgs a = p.args(DType::kFloat32, out, lse);
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / p.layout.block_bytes() + 1;
  s = cuda::decode_can_implement(ConstCacheView{p.layout, p.cache.data(), huge}, a, cuda::CudaMode::kFast);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("num_blocks"), std::string::npos) << s.message();
  s = cuda::encode_can_implement(ConstCacheView{p.layout, p.cache.data(), huge}, EncodeArgs{});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();

  // A workspace beyond size_t: 0, not a wrapped small size.
  EXPECT_EQ(cuda::decode_workspace_bytes(65535, 1 << 30, 1024, 256), 0u);
}

// Host memory handed to the device entry points is refused before any launch,
// naming the argument (a kernel would fault and poison the context).
TEST(GpuApi, HostPointersAreRejectedNamingTheArgument) {
  TQ_REQUIRE_DEVICE();
  DecodeProblem p = make_problem(Preset::k4BitNc, 128, 16, 2, 4, {100, 37}, 5);
  const int dims = DeviceDecode::kDims;
  DeviceDecode d(p);
  std::vector<std::uint8_t> host(p.cache.size() + p.query.size() + 4096);
  const DecodeArgs a = d.args;
  const MutableBuffer ws = d.workspace;
  const ConstCacheView dcache = d.view(p);
  const ConstCacheView hcache(p.layout, host.data(), p.num_blocks);
  auto expect_rejected = [](const Status& s, const char* name) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_EQ(s.message().rfind(name, 0), 0u) << s.message();
  };
  expect_rejected(cuda::decode(hcache, a, cuda::CudaMode::kFast, ws, nullptr), "cache.data");
  DecodeArgs b = a;
  b.query.data = host.data();
  expect_rejected(cuda::decode(dcache, b, cuda::CudaMode::kStrict, ws, nullptr), "query");
  b = a;
  b.out.data = host.data();
  expect_rejected(cuda::decode(dcache, b, cuda::CudaMode::kFast, ws, nullptr), "out");
  b = a;
  b.block_table.data = host.data();
  expect_rejected(cuda::decode(dcache, b, cuda::CudaMode::kFast, ws, nullptr), "block_table");
  expect_rejected(cuda::decode(dcache, a, cuda::CudaMode::kFast, MutableBuffer{host.data(), ws.bytes}, nullptr),
                  "workspace");
  // The same call with device memory everywhere runs, and the context is healthy.
  CUDA_OK(cudaMemcpy(d.query.p, p.query.data(), p.query.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d.lens.p, p.seq_lens.data(), p.seq_lens.size() * 4, cudaMemcpyHostToDevice));
  EXPECT_TRUE(cuda::decode(dcache, a, cuda::CudaMode::kFast, ws, nullptr).ok());
  CUDA_OK(cudaDeviceSynchronize());

  EncodeArgs e;
  std::vector<std::int64_t> slots = {3, 4};
  e.keys = {host.data(), std::size_t(2) * p.layout.num_kv_heads * dims * 4};
  e.values = e.keys;
  e.num_tokens = 2;
  e.slot_mapping = {slots.data(), slots.size() * 8};
  const CacheView wcache(p.layout, static_cast<std::uint8_t*>(d.cache.p), p.num_blocks);
  expect_rejected(cuda::encode(wcache, e, nullptr), "keys");
}

// Every CUDA runtime call of the backend goes through TQ_CUDA_TRY: a failure is a
// kDeviceError naming the call and CUDA's error. White-box (the macro is
// internal); cudaSetDevice(9999) fails without side effects, with or without a GPU.
TEST(GpuApi, FailingRuntimeCallsBecomeDeviceErrors) {
  auto call = []() -> Status {
    TQ_CUDA_TRY(cudaSetDevice(9999));
    return Status();
  };
  const Status s = call();
  (void)cudaGetLastError();
  EXPECT_EQ(s.code(), StatusCode::kDeviceError) << s.to_string();
  EXPECT_NE(s.message().find("cudaSetDevice(9999)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cudaError"), std::string::npos) << s.message();
}

TEST(GpuApi, NoDeviceIsReportedAsBackendUnavailable) {
  const Status s = cuda::device_status();
  if (s.ok()) {
    std::printf("device: %s\n", cuda::device_description().c_str());
    SUCCEED();
  } else {
    EXPECT_EQ(s.code(), StatusCode::kBackendUnavailable);
    DecodeProblem p = make_problem(Preset::k4BitNc, 64, 16, 1, 1, {5}, 1);
    std::vector<std::uint8_t> out;
    std::vector<float> lse;
    EXPECT_EQ(cuda::decode_from_host(p.view(), p.args(DType::kFloat32, out, lse), cuda::CudaMode::kFast).code(),
              StatusCode::kBackendUnavailable);
  }
}

}  // namespace
