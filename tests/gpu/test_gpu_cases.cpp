// The real vLLM caches of tests/data/vllm-soa and vllm-aos (AoS, e4m3 and e4b15
// keys): strict decode bit-exact with the golden model, fast decode within
// 1e-3, encode bytes equal to the CPU encode.
#include <filesystem>

#include "common/fast_tolerance.hpp"
#include "gpu_test_support.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/io/case_dir.hpp"

namespace {

using namespace tq_gpu_test;

std::vector<std::string> case_dirs(const char* set) {
  std::vector<std::string> dirs;
  const std::filesystem::path root = std::filesystem::path(TQ_TEST_DATA_DIR) / set;
  if (!std::filesystem::exists(root)) return dirs;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (e.is_directory()) dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

void expect_cases_match(const char* set, LayoutKind layout) {
  const auto dirs = case_dirs(set);
  ASSERT_FALSE(dirs.empty()) << "no case directories under " << TQ_TEST_DATA_DIR << "/" << set;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    io::CaseDir c;
    const Status ls = io::load_case(dir, io::CaseLoadOptions{}, &c);
    ASSERT_TRUE(ls.ok()) << ls.to_string();
    const BlockLayout& l = c.layout;
    ASSERT_EQ(l.format.layout, layout);
    Codebook cb;
    const Codebook* cbp = nullptr;
    if (!l.format.fp8_keys()) {
      ASSERT_TRUE(make_codebook(l.format.key_bits, c.centroids.values, &cb).ok());
      cbp = &cb;
    }
    const ConstCacheView cache(l, c.kv_cache.data(), c.num_blocks);
    auto make_args = [&](std::vector<float>& out, std::vector<float>& lse) {
      return io::case_decode_args(c, cbp, c.num_kv_splits, &out, &lse, std::nanf(""));
    };
    std::vector<float> ref_out, ref_lse, strict_out, strict_lse, fast_out, fast_lse;
    ASSERT_TRUE(decode_reference(cache, make_args(ref_out, ref_lse)).ok());
    Status st = cuda::decode_from_host(cache, make_args(strict_out, strict_lse), cuda::CudaMode::kStrict);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(first_difference(ref_out.data(), strict_out.data(), ref_out.size() * 4), -1);
    EXPECT_EQ(first_difference(ref_lse.data(), strict_lse.data(), ref_lse.size() * 4), -1);
    const char* kernel = cuda::decode_kernel_name(cache, make_args(fast_out, fast_lse), cuda::CudaMode::kFast);
    st = cuda::decode_from_host(cache, make_args(fast_out, fast_lse), cuda::CudaMode::kFast);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const double fast_err = rel_l2(fast_out, ref_out);
    const double vllm_err = rel_l2(c.expected_out.values, ref_out);
    std::printf("  %s: %s, fast rel_l2 %.3g (golden vs vLLM v1 %.3g)\n",
                std::filesystem::path(dir).filename().c_str(), kernel, fast_err, vllm_err);
    // The same K/V stored in the other layout (golden encode), decoded by the
    // fast kernel: whether an error comes from the layout or from the data
    // (fp16 operands on a sharp softmax).
    {
      BlockLayout twin = l;
      twin.format.layout = l.format.aos() ? LayoutKind::kSoA : LayoutKind::kAoS;
      std::vector<std::uint8_t> twin_cache(c.kv_cache.size(), 0);
      ASSERT_TRUE(encode_reference(CacheView{twin, twin_cache.data(), c.num_blocks}, io::case_encode_args(c, cbp)).ok());
      const ConstCacheView twin_view(twin, twin_cache.data(), c.num_blocks);
      std::vector<float> tref, tref_lse, tfast, tfast_lse;
      ASSERT_TRUE(decode_reference(twin_view, make_args(tref, tref_lse)).ok());
      ASSERT_TRUE(cuda::decode_from_host(twin_view, make_args(tfast, tfast_lse), cuda::CudaMode::kFast).ok());
      std::printf("  %s: the same K/V in %s, fast rel_l2 %.3g\n", std::filesystem::path(dir).filename().c_str(),
                  layout_name(twin.format.layout), rel_l2(tfast, tref));
    }
    EXPECT_LE(fast_err, turboquant::testing::fast_decode_tolerance(dir));

    // Encode: the case's K/V through the CPU golden encode and the GPU encode,
    // into caches pre-filled with a pattern (untouched bytes must stay).
    std::vector<std::uint8_t> ref_cache(c.kv_cache.size(), 0xa5), gpu_cache(c.kv_cache.size(), 0xa5);
    const EncodeArgs e = io::case_encode_args(c, cbp);
    ASSERT_TRUE(encode_reference(CacheView{l, ref_cache.data(), c.num_blocks}, e).ok());
    st = cuda::encode_from_host(CacheView{l, gpu_cache.data(), c.num_blocks}, e);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(first_difference(ref_cache.data(), gpu_cache.data(), ref_cache.size()), -1);
  }
}

TEST(GpuCases, DecodeAndEncodeMatchTheGoldenModel) {
  TQ_REQUIRE_DEVICE();
  expect_cases_match("vllm-soa", LayoutKind::kSoA);
}

TEST(GpuCases, AosDecodeAndEncodeMatchTheGoldenModel) {
  TQ_REQUIRE_DEVICE();
  expect_cases_match("vllm-aos", LayoutKind::kAoS);
}

}  // namespace
