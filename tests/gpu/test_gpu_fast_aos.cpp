// The fast decode on AoS caches: every preset and head_dim, both slot phases
// (num_kv_heads 2 and 8: heads at odd and even multiples of a 4k + 2 byte
// slot), both loaders (num_kv_heads 8 gives token strides that are multiples
// of 16: tensor copies for 4bit_nc and k3v4_nc, tensor_box.hpp; 2 the
// cp.async loader), both FP8
// flavours, must run the fast kernel (not the strict fallback) and stay
// within relative L2 1e-3 of the golden model; AoS caches whose slots of one
// head change their 4-byte phase take the strict kernel.
#include "common/multi_problem.hpp"
#include "decode_setup.hpp"
#include "device_decode.hpp"
#include "fast_plan.hpp"
#include "tensor_box.hpp"
#include "gpu_test_support.hpp"

namespace turboquant::cuda::detail {  // gpu/src/launch.hpp (internal; its generated head_dims.hpp is not on this path)
int device_sm_count();
int device_dram_mbps_per_sm();
int fast_decode_occupancy(const core::Format& f, bool tensor_copy, int column_tiles, int warps);
int fast_decode_cluster_residency(const core::Format& f, bool tensor_copy, int column_tiles, int warps, int cluster);
}  // namespace turboquant::cuda::detail

namespace {

using namespace tq_gpu_test;

class GpuFastAos : public ::testing::Test {
 protected:
  void SetUp() override { TQ_REQUIRE_DEVICE(); }
};

// The golden output (fp32) and the fast mode's; returns the kernel that ran.
std::string expect_fast_matches(const DecodeProblem& p) {
  std::vector<std::uint8_t> ref_out, fast_out;
  std::vector<float> ref_lse, fast_lse;
  EXPECT_TRUE(decode_reference(p.view(), p.args(DType::kFloat32, ref_out, ref_lse)).ok());
  const DecodeArgs a = p.args(DType::kFloat32, fast_out, fast_lse);
  const std::string kernel = cuda::decode_kernel_name(p.view(), a, cuda::CudaMode::kFast);
  const Status st = cuda::decode_from_host(p.view(), a, cuda::CudaMode::kFast);
  EXPECT_TRUE(st.ok()) << st.to_string();
  const double err = rel_l2(widen(fast_out, DType::kFloat32), widen(ref_out, DType::kFloat32));
  double lse_err = 0.0;
  for (std::size_t i = 0; i < ref_lse.size(); ++i) {
    if (std::isinf(ref_lse[i])) {
      EXPECT_EQ(ref_lse[i], fast_lse[i]) << "row " << i;
    } else {
      lse_err = std::max(lse_err, std::fabs(double(fast_lse[i]) - ref_lse[i]));
    }
  }
  std::printf("  %-64s %s rel_l2 %.3g, max |lse err| %.3g\n", describe(p).c_str(), kernel.c_str(), err, lse_err);
  EXPECT_LE(err, 1e-3);
  EXPECT_LE(lse_err, 1e-2);
  return kernel;
}

// Which loader the fast decode of this AoS cache uses.
const char* loader_of(const DecodeProblem& p) {
  return cuda::detail::tensor_copy_fits(p.layout) ? "tensor copies" : "cp.async";
}

TEST_F(GpuFastAos, EveryPresetAndPhaseRunsFastWithinTolerance) {
  const std::uint32_t seed = 20261202;
  std::printf("seed %u\n", seed);
  unsigned index = 0;
  int tensor_copy_runs = 0;
  for (int dims : cuda::supported_head_dims()) {
    for (Preset preset : kAllPresets) {
      for (int hk : {2, 8}) {
        // Lengths around tile and split edges; GQA 4 (half the mma columns) and 8.
        const int group = hk == 2 ? 8 : 4;
        const DecodeProblem p = make_problem(preset, dims, 16, hk, group, {1, 17, 300, 2049}, seed + index++,
                                             LayoutKind::kAoS);
        SCOPED_TRACE(describe(p));
        std::printf("  loader: %s\n", loader_of(p));
        // 8 KV heads at head_dim 128: tensor copies for 4bit_nc and k3v4_nc (tensor_copy_format).
        const bool tensor = hk == 8 && dims == 128 && (preset == Preset::k4BitNc || preset == Preset::kK3V4Nc);
        if (hk == 2 || (hk == 8 && dims == 128)) {
          EXPECT_STREQ(loader_of(p), tensor ? "tensor copies" : "cp.async");
        }
        tensor_copy_runs += cuda::detail::tensor_copy_fits(p.layout);
        EXPECT_EQ(expect_fast_matches(p), "cuda:fast");
      }
    }
  }
  EXPECT_GE(tensor_copy_runs, 2);
}

// Tensor copies of tiles that start inside larger cache blocks (block_size 32
// and 64: the box's position coordinate 16, 32, 48), of the last KV head (its
// box runs past the position's bytes, filled with zeros) and of many
// blocks, with shuffled block tables; SoA k3v4_nc's records and metadata boxes too.
TEST_F(GpuFastAos, TensorCopiesInsideLargerBlocks) {
  unsigned index = 0;
  for (const auto& [preset, layout] : {std::pair{Preset::k4BitNc, LayoutKind::kAoS},
                                      std::pair{Preset::kK3V4Nc, LayoutKind::kAoS},
                                      std::pair{Preset::kK3V4Nc, LayoutKind::kSoA}}) {
    for (int block_size : {32, 64}) {
      const DecodeProblem p = make_problem(preset, 128, block_size, 8, 4, {31, 500, 3000}, 4242 + index++, layout);
      SCOPED_TRACE(describe(p));
      EXPECT_STREQ(loader_of(p), "tensor copies");
      EXPECT_EQ(expect_fast_matches(p), "cuda:fast");
    }
  }
}

TEST_F(GpuFastAos, E4b15KeysRunFast) {
  unsigned index = 0;
  for (int dims : cuda::supported_head_dims()) {
    for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
      // num_kv_heads 3: FP8 slots are 4k bytes, so any head count keeps the phase.
      const DecodeProblem p =
          make_problem(Preset::kK8V4, dims, 32, 3, 4, {5, 700}, 99 + index++, layout, Fp8Format::kE4b15);
      SCOPED_TRACE(describe(p));
      EXPECT_EQ(expect_fast_matches(p), "cuda:fast");
    }
  }
}

// Sets the AoS head pacing (cluster_pace.cuh) for a scope.
struct PaceScope : tq_gpu_test::PolicyScope<cuda::detail::PacePolicy> {
  explicit PaceScope(cuda::detail::PacePolicy policy)
      : PolicyScope(cuda::detail::pace_policy, cuda::detail::set_pace_policy, policy) {}
};

// Sets the fused-heads policy (fast_plan.hpp's fast_fusable_heads) for a scope.
struct FusedScope : tq_gpu_test::PolicyScope<cuda::detail::FusedPolicy> {
  explicit FusedScope(cuda::detail::FusedPolicy policy)
      : PolicyScope(cuda::detail::fused_policy, cuda::detail::set_fused_policy, policy) {}
};

bool device_has_clusters() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
}

// The cluster a fast plan of p gives its blocks (DecodeParams::pace_cluster);
// window: a sliding window (the multi-token rows' kernel).
int planned_cluster(const DecodeProblem& p, int window = 0) {
  DeviceDecode d(p);
  d.args.sliding_window = window;
  cuda::DecodePlan::Impl impl;
  const Status s = cuda::detail::make_plan(d.view(p), d.args, cuda::CudaMode::kFast, d.workspace, &impl);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(impl.fast);
  return impl.params.pace_cluster;
}

// The fast plan of m's multi-token rows. make_plan reads no buffer, only
// where each pointer lives: device allocations of the arguments' sizes.
cuda::DecodePlan::Impl fast_plan_of(const turboquant::testing::MultiProblem& m) {
  std::vector<float> out, lse;
  DecodeArgs a = m.args(out, lse);
  const std::size_t work_bytes =
      cuda::decode_workspace_bytes(m.rows, m.p.num_q_heads, a.num_splits, m.p.layout.format.head_dim);
  DeviceMem cache(m.p.cache.size()), query(a.query.bytes), table(a.block_table.bytes), lens(a.seq_lens.bytes),
      starts(a.query_start_loc.bytes), o(a.out.bytes), l(a.lse.bytes), work(work_bytes);
  a.query.data = query.p;
  a.block_table.data = table.p;
  a.seq_lens.data = lens.p;
  a.query_start_loc.data = starts.p;
  a.out.data = o.p;
  a.lse.data = l.p;
  cuda::DecodePlan::Impl impl;
  const Status s = cuda::detail::make_plan(ConstCacheView(m.p.layout, cache.at(0), m.p.num_blocks), a,
                                           cuda::CudaMode::kFast, {work.p, work_bytes}, &impl);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(impl.fast);
  return impl;
}

// The cluster a fast plan of m's multi-token rows gives its blocks.
int planned_cluster(const turboquant::testing::MultiProblem& m) { return fast_plan_of(m).params.pace_cluster; }

// (Fused heads off: pacing is the plan of one KV head a block.)
// Single-token plans of the pace_capable instances (AoS tensor copies and FP8 keys), on devices of little
// DRAM bandwidth per SM, run the KV heads (and head chunks) of a split as one
// cluster of a power of two up to 8 that divides them, as large as holds as
// many resident blocks as single blocks do (or the policy's limit, forced, on
// any device), and so do windows (the multi-token rows' kernel of one column
// tile); the 3-bit cp.async instances, SoA and the policy's limit of 1, none.
TEST_F(GpuFastAos, PlansPaceTheKvHeadsOfASplitInClusters) {
  const FusedScope unfused(cuda::detail::FusedPolicy::kOff);  // pacing is for one KV head a block
  if (!device_has_clusters()) GTEST_SKIP() << "thread-block clusters need sm_90";
  struct Case {
    Preset preset;
    int kv_heads, group;
    LayoutKind layout;
    int forced;  // the cluster of the forced policy
  };
  const Case cases[] = {{Preset::k4BitNc, 8, 4, LayoutKind::kAoS, 8},  {Preset::kK3V4Nc, 8, 1, LayoutKind::kAoS, 8},
                        {Preset::k4BitNc, 8, 16, LayoutKind::kAoS, 8}, {Preset::kK8V4, 6, 4, LayoutKind::kAoS, 2},
                        {Preset::k3BitNc, 2, 8, LayoutKind::kAoS, 1},  {Preset::k4BitNc, 8, 4, LayoutKind::kSoA, 1}};
  const int sms = cuda::detail::device_sm_count();
  const bool paced_device = cuda::detail::device_dram_mbps_per_sm() < cuda::detail::kPaceMaxDramMbpsPerSm;
  std::printf("  DRAM bandwidth per SM %d MB/s: %s\n", cuda::detail::device_dram_mbps_per_sm(),
              paced_device ? "paced" : "not paced unless forced");
  unsigned seed = 31;
  for (const Case& c : cases) {
    const DecodeProblem p = make_problem(c.preset, 128, 16, c.kv_heads, c.group, {700, 33}, seed++, c.layout);
    SCOPED_TRACE(describe(p));
    const bool tensor_copy = cuda::detail::tensor_copy_fits(p.layout);
    EXPECT_EQ(tensor_copy, c.layout == LayoutKind::kAoS && (c.preset == Preset::k4BitNc || c.preset == Preset::kK3V4Nc));
    const int blocks = sms * cuda::detail::fast_decode_occupancy(p.layout.format, tensor_copy, 1, 0);
    std::printf("  %-56s resident blocks %d; in clusters of 2, 4, 8: %d, %d, %d\n", describe(p).c_str(), blocks,
                cuda::detail::fast_decode_cluster_residency(p.layout.format, tensor_copy, 1, 0, 2),
                cuda::detail::fast_decode_cluster_residency(p.layout.format, tensor_copy, 1, 0, 4),
                cuda::detail::fast_decode_cluster_residency(p.layout.format, tensor_copy, 1, 0, 8));
    const int planned = planned_cluster(p);
    if (c.forced == 1 || !paced_device) {
      EXPECT_EQ(planned, 1);
    } else if (planned > 1) {
      EXPECT_EQ(p.layout.num_kv_heads * ((c.group + 7) / 8) % planned, 0);
      EXPECT_GE(cuda::detail::fast_decode_cluster_residency(p.layout.format, tensor_copy, 1, 0, planned), blocks);
    }
    {
      const PaceScope forced({cuda::detail::kPaceMaxCluster, 1, true});
      EXPECT_EQ(planned_cluster(p), c.forced);
      EXPECT_EQ(planned_cluster(p, 100), c.forced);
    }
    const PaceScope off({1, 1, false});
    EXPECT_EQ(planned_cluster(p), 1);
  }
}

// Pacing changes when blocks run, never a bit of what they write (the plan's
// splits do not depend on it): every forced cluster size and pace gives the
// unpaced decode's output and LSE bitwise (single-token rows of the
// pace_capable instances: tensor copies and FP8 keys, block sizes 16 and 32;
// lengths around tile, split and pacing-round edges).
TEST_F(GpuFastAos, PacingChangesNoBit) {
  const FusedScope unfused(cuda::detail::FusedPolicy::kOff);  // pacing is for one KV head a block
  unsigned seed = 77;
  for (const auto& [preset, group, block_size] : {std::tuple{Preset::k4BitNc, 4, 16}, std::tuple{Preset::kK3V4Nc, 1, 16},
                                                  std::tuple{Preset::k4BitNc, 16, 32}, std::tuple{Preset::kK3V4Nc, 4, 32},
                                                  std::tuple{Preset::kK8V4, 4, 16}}) {
    const DecodeProblem p =
        make_problem(preset, 128, block_size, 8, group, {1, 17, 300, 2049, 1027}, seed++, LayoutKind::kAoS);
    SCOPED_TRACE(describe(p));
    auto run = [&](cuda::detail::PacePolicy policy, std::vector<std::uint8_t>& out, std::vector<float>& lse) {
      const PaceScope scope(policy);
      if (device_has_clusters()) {
        EXPECT_EQ(planned_cluster(p) > 1, policy.max_cluster > 1 && policy.force);
      }
      const DecodeArgs a = p.args(DType::kFloat32, out, lse);
      EXPECT_STREQ(cuda::decode_kernel_name(p.view(), a, cuda::CudaMode::kFast), "cuda:fast");
      const Status st = cuda::decode_from_host(p.view(), a, cuda::CudaMode::kFast);
      EXPECT_TRUE(st.ok()) << st.to_string();
    };
    std::vector<std::uint8_t> want;
    std::vector<float> want_lse;
    run({1, 1, false}, want, want_lse);
    for (const cuda::detail::PacePolicy policy : {cuda::detail::PacePolicy{8, 1, true}, cuda::detail::PacePolicy{2, 3, true},
                                                  cuda::detail::PacePolicy{4, 64, true}}) {
      SCOPED_TRACE("cluster " + std::to_string(policy.max_cluster) + ", pace " + std::to_string(policy.pace_tiles));
      std::vector<std::uint8_t> out;
      std::vector<float> lse;
      run(policy, out, lse);
      EXPECT_EQ(out, want);
      EXPECT_EQ(0, std::memcmp(lse.data(), want_lse.data(), lse.size() * sizeof(float)));
    }
  }
}

// Multi-token rows of an AoS cache of 8 KV heads at GQA 4 (block size 16,
// three sequences of 2049, 17 and 1027 tokens) with q_lens and a window.
turboquant::testing::MultiSpec aos_rows_spec(Preset preset, std::vector<int> q_lens, int window, std::uint32_t seed,
                                             int head_dim = 128) {
  turboquant::testing::MultiSpec spec;
  spec.base.format = preset_format(preset, head_dim, LayoutKind::kAoS);
  spec.base.num_kv_heads = 8;
  spec.base.group = 4;
  spec.base.block_size = 16;
  spec.base.seq_lens = {2049, 17, 1027};
  spec.base.seed = seed;
  spec.q_lens = std::move(q_lens);
  spec.window = window;
  return spec;
}

// The multi-token rows' kernel of one column tile (q_len 2 at GQA 4: 8
// columns a block), with and without a window, is paced as the single-token
// one: the forced clusters give the unpaced bits, for the tensor-copy and FP8
// instances, within the fast bound of the golden model.
TEST_F(GpuFastAos, PacedMultiTokenRowsChangeNoBit) {
  const FusedScope unfused(cuda::detail::FusedPolicy::kOff);  // pacing is for one KV head a block
  if (!device_has_clusters()) GTEST_SKIP() << "thread-block clusters need sm_90";
  std::uint32_t seed = 91;
  for (const Preset preset : {Preset::k4BitNc, Preset::kK3V4Nc, Preset::kK8V4}) {
    for (const int window : {0, 300}) {
      const turboquant::testing::MultiSpec spec = aos_rows_spec(preset, {2, 1, 2}, window, seed++);
      SCOPED_TRACE(spec.name());
      const turboquant::testing::MultiProblem m = turboquant::testing::make_multi_problem(spec);
      ASSERT_EQ(cuda::detail::fast_column_tiles(true, spec.base.group, m.rows, m.p.batch, 128), 1);
      auto run = [&](cuda::detail::PacePolicy policy, std::vector<float>& out, std::vector<float>& lse) {
        const PaceScope scope(policy);
        EXPECT_EQ(planned_cluster(m), policy.force ? policy.max_cluster : 1);
        const DecodeArgs a = m.args(out, lse);
        EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kFast), "cuda:fast");
        const Status st = cuda::decode_from_host(m.p.view(), a, cuda::CudaMode::kFast);
        EXPECT_TRUE(st.ok()) << st.to_string();
      };
      std::vector<float> want, want_lse;
      run({1, 1, false}, want, want_lse);
      for (const cuda::detail::PacePolicy policy : {cuda::detail::PacePolicy{8, 1, true}, cuda::detail::PacePolicy{2, 3, true}}) {
        SCOPED_TRACE("cluster " + std::to_string(policy.max_cluster) + ", pace " + std::to_string(policy.pace_tiles));
        std::vector<float> out, lse;
        run(policy, out, lse);
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(lse.data(), want_lse.data(), lse.size() * sizeof(float)));
      }
      std::vector<float> golden, golden_lse;
      ASSERT_TRUE(decode_reference(m.p.view(), m.args(golden, golden_lse)).ok());
      EXPECT_LE(rel_l2(want, golden), 1e-3);
    }
  }
}

// The fast plan of a decode of `batch` sequences of q_len query rows (> 1:
// query_start_loc) of `num_q_heads` over block tables of max_blocks pages of
// layout l. make_plan reads no buffer, only where each pointer lives: device
// allocations of the arguments' sizes (one cache block).
cuda::DecodePlan::Impl plan_of_shape(const BlockLayout& l, int num_q_heads, int batch, int max_blocks, int q_len = 1) {
  const int dims = l.format.head_dim;
  const int rows = batch * q_len;
  DecodeArgs a;
  a.batch = batch;
  a.num_q_heads = num_q_heads;
  a.max_blocks_per_seq = max_blocks;
  a.softmax_scale = 0.125f;
  const std::size_t rows_bytes = std::size_t{4} * rows * num_q_heads;
  const std::size_t work_bytes = cuda::decode_workspace_bytes(rows, num_q_heads, a.num_splits, dims);
  DeviceMem cache(l.block_bytes()), query(rows_bytes * dims), table(std::size_t{4} * batch * max_blocks),
      lens(std::size_t{4} * batch), o(rows_bytes * dims), lse(rows_bytes), work(work_bytes),
      starts(std::size_t{4} * (batch + 1));
  if (q_len > 1) {
    a.query_start_loc = {starts.p, std::size_t{4} * (batch + 1)};
    a.num_query_rows = rows;
  }
  a.query = {query.p, rows_bytes * dims};
  a.block_table = {table.p, std::size_t{4} * batch * max_blocks};
  a.seq_lens = {lens.p, std::size_t{4} * batch};
  a.out = {o.p, rows_bytes * dims};
  a.lse = {lse.p, rows_bytes};
  cuda::DecodePlan::Impl impl;
  const Status s = cuda::detail::make_plan(ConstCacheView(l, cache.at(0), 1), a, cuda::CudaMode::kFast,
                                           {work.p, work_bytes}, &impl);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(impl.fast);
  return impl;
}

// Whether a fast plan may fuse the KV heads of layout l's blocks of
// `column_tiles` (the tests' problems: Hadamard rotation; on sm_90, where
// tensor_copy_fits takes tensor copies).
bool fusable(const BlockLayout& l, int column_tiles) {
  return cuda::detail::fast_fusable_heads(l.aos(), l.format.head_dim, column_tiles, l.format.key_bits,
                                          l.num_kv_heads, false,
                                          device_has_clusters() && cuda::detail::tensor_copy_fits(l));
}

// Fused heads (one KV head a warp, fast_plan.hpp's fast_fusable_heads): the
// plan takes them for AoS caches whose KV heads fill whole blocks where their
// grid is as busy as one KV head a block (32 x 8192 and 16 x 32768 at Hk 8:
// 256 blocks either way on a 132-SM device) and each warp streams a long run
// of its head (fast_fused_pays_off), never paced, and keeps one head a block
// for a short single sequence (1 x 4096: 64 fused blocks against 256; q_len 4
// and 8: 64 tokens a warp), 8 x 8192 (256 tokens a warp; q_len 4: 341), SoA,
// the cp.async instances of Lloyd-Max keys (3bit_nc; k3v4_nc at Hk 4, whose
// token stride is no multiple of 16) and KV heads that do not fill a block.
TEST_F(GpuFastAos, PlansFusedHeadsWhereTheirGridFillsTheDevice) {
  using cuda::detail::FusedPolicy;
  struct Case {
    Preset preset;
    LayoutKind layout;
    int kv_heads, batch, tokens, q_len;
    bool fused;  // under kAuto
    bool fusable;
  };
  const Case cases[] = {{Preset::k4BitNc, LayoutKind::kAoS, 8, 32, 8192, 1, true, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 16, 32768, 1, true, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 16, 32768, 2, true, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 16, 32768, 4, true, true},
                        {Preset::kK8V4, LayoutKind::kAoS, 8, 16, 32768, 1, true, true},
                        {Preset::kK3V4Nc, LayoutKind::kAoS, 8, 32, 8192, 1, true, true},
                        {Preset::kK3V4Nc, LayoutKind::kAoS, 4, 32, 8192, 1, false, false},  // cp.async at Hk 4
                        {Preset::k3BitNc, LayoutKind::kAoS, 4, 32, 8192, 1, false, false},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 1, 4096, 1, false, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 1, 4096, 4, false, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 1, 4096, 8, false, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 8, 8192, 1, false, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 8, 8, 8192, 4, false, true},
                        {Preset::k4BitNc, LayoutKind::kAoS, 4, 16, 32768, 1, false, false},
                        {Preset::k4BitNc, LayoutKind::kSoA, 8, 16, 32768, 1, false, false}};
  for (const Case& c : cases) {
    const BlockLayout l{preset_format(c.preset, 128, c.layout), 16, c.kv_heads};
    SCOPED_TRACE(std::string(preset_name(c.preset)) + " " + (c.layout == LayoutKind::kAoS ? "aos" : "soa") + " Hk " +
                 std::to_string(c.kv_heads) + " " + std::to_string(c.batch) + " x " + std::to_string(c.tokens) +
                 " q_len " + std::to_string(c.q_len));
    const int pages = c.tokens / 16;
    for (const FusedPolicy policy : {FusedPolicy::kAuto, FusedPolicy::kOff, FusedPolicy::kForce}) {
      const FusedScope scope(policy);
      const cuda::DecodePlan::Impl impl = plan_of_shape(l, 4 * c.kv_heads, c.batch, pages, c.q_len);
      const bool want = policy == FusedPolicy::kAuto ? c.fused : policy == FusedPolicy::kForce && c.fusable;
      EXPECT_EQ(impl.params.fast_kv_heads_per_block > 1, want) << "policy " << static_cast<int>(policy);
      if (impl.params.fast_kv_heads_per_block > 1) {
        EXPECT_EQ(impl.params.pace_cluster, 1);
      }
    }
  }
}

// Blocks of fused heads decode every fusable AoS preset (3bit_nc checks that
// it keeps one head a block) within the fast bound of the golden model, at
// every head_dim: single-token rows (GQA 1, 4, 16: one and two head chunks;
// one and two head blocks), both loaders (Hk 8: tensor copies for 4bit_nc and
// k3v4_nc; 3bit_nc and k8v4 by cp.async), both FP8 flavours, block sizes 16
// and 32, lengths around tile and split edges; and they write what one KV head
// a block writes, to the fast bound.
TEST_F(GpuFastAos, FusedHeadsMatchTheGoldenModel) {
  using cuda::detail::FusedPolicy;
  std::uint32_t seed = 301;
  struct Case {
    Preset preset;
    int kv_heads, group, block_size;
    Fp8Format fp8;
  };
  const Case cases[] = {{Preset::k4BitNc, 8, 4, 16, Fp8Format::kE4m3},  {Preset::k4BitNc, 16, 16, 32, Fp8Format::kE4m3},
                        {Preset::kK3V4Nc, 8, 1, 16, Fp8Format::kE4m3},  {Preset::kK3V4Nc, 4, 8, 32, Fp8Format::kE4m3},
                        {Preset::k3BitNc, 4, 4, 16, Fp8Format::kE4m3},  {Preset::kK8V4, 8, 4, 16, Fp8Format::kE4m3},
                        {Preset::kK8V4, 4, 16, 16, Fp8Format::kE4b15}, {Preset::k4BitNc, 8, 1, 32, Fp8Format::kE4m3}};
  for (const int dims : cuda::supported_head_dims()) {
    for (const Case& c : cases) {
      DecodeProblem p = make_problem(c.preset, dims, c.block_size, c.kv_heads, c.group, {1, 17, 300, 2049, 1027},
                                     seed++, LayoutKind::kAoS, c.fp8);
      SCOPED_TRACE(describe(p));
      std::vector<std::uint8_t> fused, unfused;
      std::vector<float> fused_lse, unfused_lse;
      for (const FusedPolicy policy : {FusedPolicy::kForce, FusedPolicy::kOff}) {
        const FusedScope scope(policy);
        DeviceDecode d(p);
        cuda::DecodePlan::Impl impl;
        ASSERT_TRUE(cuda::detail::make_plan(d.view(p), d.args, cuda::CudaMode::kFast, d.workspace, &impl).ok());
        const bool fuses = policy == FusedPolicy::kForce && fusable(p.layout, 1);
        EXPECT_EQ(impl.params.fast_kv_heads_per_block,
                  fuses ? cuda::detail::fast_format_warps(p.layout.format.key_bits) : 1);
        EXPECT_EQ(expect_fast_matches(p), "cuda:fast");
        auto& out = policy == FusedPolicy::kForce ? fused : unfused;
        auto& lse = policy == FusedPolicy::kForce ? fused_lse : unfused_lse;
        ASSERT_TRUE(cuda::decode_from_host(p.view(), p.args(DType::kFloat32, out, lse), cuda::CudaMode::kFast).ok());
      }
      EXPECT_LE(rel_l2(widen(fused, DType::kFloat32), widen(unfused, DType::kFloat32)), 1e-3);
    }
  }
}

// Multi-token rows and windows in blocks of fused heads, at every head_dim:
// one column tile (q_len 2 at GQA 4: one KV head a warp) and two (q_len 4: 4
// KV heads a block, one or three warps a head; one tile at the head_dims
// without two, fast_has_two_column_tiles), within the fast bound of the
// golden model.
TEST_F(GpuFastAos, FusedMultiTokenRowsMatchTheGoldenModel) {
  const FusedScope scope(cuda::detail::FusedPolicy::kForce);
  std::uint32_t seed = 401;
  for (const int dims : cuda::supported_head_dims()) {
    for (const Preset preset : {Preset::k4BitNc, Preset::kK3V4Nc, Preset::kK8V4, Preset::k3BitNc}) {
      for (const auto& [q_lens, window, two_tiles] : {std::tuple{std::vector<int>{2, 1, 2}, 0, false},
                                                      std::tuple{std::vector<int>{2, 1, 2}, 300, false},
                                                      std::tuple{std::vector<int>{4, 1, 4}, 0, true},
                                                      std::tuple{std::vector<int>{4, 3, 4}, 300, true}}) {
        const turboquant::testing::MultiSpec spec = aos_rows_spec(preset, q_lens, window, seed++, dims);
        SCOPED_TRACE(spec.name());
        const turboquant::testing::MultiProblem m = turboquant::testing::make_multi_problem(spec);
        const int tiles = two_tiles && cuda::detail::fast_has_two_column_tiles(dims) ? 2 : 1;
        ASSERT_EQ(cuda::detail::fast_column_tiles(true, spec.base.group, m.rows, m.p.batch, dims), tiles);
        EXPECT_EQ(fast_plan_of(m).params.fast_kv_heads_per_block,
                  fusable(m.p.layout, tiles) ? cuda::detail::fast_fused_kv_heads(tiles, spec.base.format.key_bits) : 1);
        std::vector<float> out, lse, golden, golden_lse;
        const DecodeArgs a = m.args(out, lse);
        EXPECT_STREQ(cuda::decode_kernel_name(m.p.view(), a, cuda::CudaMode::kFast), "cuda:fast");
        ASSERT_TRUE(cuda::decode_from_host(m.p.view(), a, cuda::CudaMode::kFast).ok());
        ASSERT_TRUE(decode_reference(m.p.view(), m.args(golden, golden_lse)).ok());
        const double err = rel_l2(out, golden);
        std::printf("  %-64s fused, %d column tile(s): rel_l2 %.3g\n", spec.name().c_str(), tiles, err);
        EXPECT_LE(err, 1e-3);
      }
    }
  }
}

// 4bit_nc slots are 4k + 2 bytes at every head_dim (70, 134, 262): with 3 KV
// heads the token stride is 4k + 2 too, so the slots of one head alternate
// their 4-byte phase and the strict kernel runs.
TEST_F(GpuFastAos, AlternatingSlotPhaseTakesStrict) {
  const int dims = cuda::supported_head_dims().front();
  const DecodeProblem p = make_problem(Preset::k4BitNc, dims, 16, 3, 4, {100, 33}, 5, LayoutKind::kAoS);
  SCOPED_TRACE(describe(p));
  EXPECT_EQ(expect_fast_matches(p), "cuda:strict");
}

}  // namespace
