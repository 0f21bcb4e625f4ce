// The fast decode on AoS caches: every preset and head_dim, both slot phases
// (num_kv_heads 2 and 8: heads at odd and even multiples of a 4k + 2 byte
// slot), both loaders (num_kv_heads 8 gives token strides that are multiples
// of 16: tensor copies for 4bit_nc and k3v4_nc, tensor_box.hpp; 2 the
// cp.async loader), both FP8
// flavours, must run the fast kernel (not the strict fallback) and stay
// within relative L2 1e-3 of the golden model; AoS caches whose slots of one
// head change their 4-byte phase take the strict kernel. Head teams
// (fast_plan.hpp: a block's warps take consecutive KV heads), forced by
// TQ_FAST_HEAD_TEAMS=on, meet the same bound, and the plan picks them only
// where they fit.
#include "common/scoped_env.hpp"
#include "decode_setup.hpp"
#include "device_decode.hpp"
#include "fast_plan.hpp"
#include "tensor_box.hpp"
#include "gpu_test_support.hpp"

namespace {

using namespace tq_gpu_test;
using tq_test::ScopedEnv;

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
        if (hk == 2 || (hk == 8 && dims == 128)) EXPECT_STREQ(loader_of(p), tensor ? "tensor copies" : "cp.async");
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
  for (const auto [preset, layout] : {std::pair{Preset::k4BitNc, LayoutKind::kAoS},
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

// 4bit_nc slots are 4k + 2 bytes at every head_dim (70, 134, 262): with 3 KV
// heads the token stride is 4k + 2 too, so the slots of one head alternate
// their 4-byte phase and the strict kernel runs.
TEST_F(GpuFastAos, AlternatingSlotPhaseTakesStrict) {
  const int dims = cuda::supported_head_dims().front();
  const DecodeProblem p = make_problem(Preset::k4BitNc, dims, 16, 3, 4, {100, 33}, 5, LayoutKind::kAoS);
  SCOPED_TRACE(describe(p));
  EXPECT_EQ(expect_fast_matches(p), "cuda:strict");
}

// Head teams forced on: every preset and head_dim, KV heads 4 and 8 (slots
// of both 4-byte phases inside one block: neighbouring warps branch to
// different stage readers), GQA 1, 4 and 8, lengths around tile and split
// edges, block sizes 16 and 32; e4b15 keys too.
TEST_F(GpuFastAos, HeadTeamsRunWithinTolerance) {
  ScopedEnv teams("TQ_FAST_HEAD_TEAMS", "on");
  unsigned index = 0;
  int runs = 0;
  for (int dims : cuda::supported_head_dims()) {
    for (Preset preset : kAllPresets) {
      for (int hk : {4, 8}) {
        for (int group : {1, 4, 8}) {
          const int block_size = index % 2 ? 32 : 16;
          const DecodeProblem p = make_problem(preset, dims, block_size, hk, group, {1, 17, 300, 2049},
                                               7100 + index++, LayoutKind::kAoS);
          if (!cuda::detail::fast_head_teams_fit(hk, group, p.layout.format.key_bits)) continue;
          SCOPED_TRACE(describe(p));
          EXPECT_EQ(expect_fast_matches(p), "cuda:fast");
          ++runs;
        }
      }
    }
  }
  const DecodeProblem e4b15 =
      make_problem(Preset::kK8V4, 128, 16, 4, 4, {5, 700}, 7199, LayoutKind::kAoS, Fp8Format::kE4b15);
  SCOPED_TRACE(describe(e4b15));
  EXPECT_EQ(expect_fast_matches(e4b15), "cuda:fast");
  EXPECT_GE(runs, 30);
}

// The plan's choice: forced on where they fit (not for SoA, multi-token rows
// or a group over 8), never when off; left to the plan, they take a batch
// whose team grid fills the GPU and not a single sequence.
TEST_F(GpuFastAos, PlanPicksHeadTeamsWhereTheyFit) {
  auto teams = [](const DecodeProblem& p) {
    DeviceDecode d(p);
    cuda::DecodePlan::Impl plan;
    const Status s = cuda::detail::make_plan(d.view(p), d.args, cuda::CudaMode::kFast, d.workspace, &plan);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return plan.params.fast_head_teams;
  };
  const DecodeProblem aos = make_problem(Preset::k4BitNc, 128, 16, 8, 4, {100, 2000}, 1, LayoutKind::kAoS);
  const DecodeProblem soa = make_problem(Preset::k4BitNc, 128, 16, 8, 4, {100, 2000}, 1, LayoutKind::kSoA);
  const DecodeProblem wide = make_problem(Preset::kK3V4Nc, 128, 16, 4, 16, {100}, 2, LayoutKind::kAoS);
  const DecodeProblem one = make_problem(Preset::kK3V4Nc, 128, 16, 4, 4, {4000}, 3, LayoutKind::kAoS);
  const DecodeProblem many = make_problem(Preset::kK3V4Nc, 128, 16, 8, 4, std::vector<int>(256, 40), 4,
                                          LayoutKind::kAoS);
  {
    ScopedEnv on("TQ_FAST_HEAD_TEAMS", "on");
    EXPECT_TRUE(teams(aos));
    EXPECT_FALSE(teams(soa));
    EXPECT_FALSE(teams(wide));  // group 16: two chunks per KV head
  }
  {
    ScopedEnv off("TQ_FAST_HEAD_TEAMS", "off");
    EXPECT_FALSE(teams(aos));
    EXPECT_FALSE(teams(many));
  }
  ScopedEnv plan_choice("TQ_FAST_HEAD_TEAMS", nullptr);
  EXPECT_FALSE(teams(one));
  EXPECT_TRUE(teams(many));
}

}  // namespace
