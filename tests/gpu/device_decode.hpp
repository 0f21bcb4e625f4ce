// Device copies of a test decode problem (tests/gpu, DeviceMem of
// gpu_test_support.hpp) and DecodeArgs naming them.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "gpu_test_support.hpp"

namespace tq_gpu_test {

// Device copies of a DecodeProblem's buffers (cache and tables uploaded; query
// and seq_lens uploaded by the caller when it wants) and DecodeArgs naming them.
// The cache may start cache_offset bytes past the allocation's (aligned) start.
// Buffers are sized for the problem's head_dim.
struct DeviceDecode {
  static constexpr int kDims = 128;  // the head_dim of the tests that need only one
  int dims;                          // the problem's head_dim
  DeviceMem cache, query, table, lens, out, lse, work;
  DecodeArgs args;
  MutableBuffer workspace;
  std::size_t cache_offset;
  explicit DeviceDecode(const DecodeProblem& p, std::size_t offset = 0)
      : dims(p.layout.format.head_dim), cache(p.cache.size() + offset), query(p.query.size()),
        table(p.block_table.size() * 4), lens(p.seq_lens.size() * 4), out(p.rows() * dims * 4), lse(p.rows() * 4),
        work(cuda::decode_workspace_bytes(p.batch, p.num_q_heads, p.num_splits, dims)), cache_offset(offset) {
    EXPECT_EQ(cudaMemcpy(cache_data(), p.cache.data(), p.cache.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(table.p, p.block_table.data(), p.block_table.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    args.query = {query.p, p.query.size()};
    args.batch = p.batch;
    args.num_q_heads = p.num_q_heads;
    args.block_table = {table.p, p.block_table.size() * 4};
    args.max_blocks_per_seq = p.max_blocks_per_seq;
    args.seq_lens = {lens.p, p.seq_lens.size() * 4};
    args.softmax_scale = p.softmax_scale;
    args.num_splits = p.num_splits;
    args.out = {out.p, p.rows() * dims * 4};
    args.lse = {lse.p, p.rows() * 4};
    workspace = {work.p, cuda::decode_workspace_bytes(p.batch, p.num_q_heads, p.num_splits, dims)};
  }
  std::uint8_t* cache_data() const { return static_cast<std::uint8_t*>(cache.p) + cache_offset; }
  ConstCacheView view(const DecodeProblem& p) const { return ConstCacheView(p.layout, cache_data(), p.num_blocks); }
};


// Compares the decode d holds on the device (fp32 out and lse) with
// decode_reference of p: strict bitwise, fast within relative L2 1e-3.
inline void expect_matches_reference(const DecodeProblem& p, const DeviceDecode& d, turboquant::cuda::CudaMode mode,
                                     const std::string& what) {
  std::vector<float> got(p.rows() * d.dims), got_lse(p.rows());
  ASSERT_EQ(cudaMemcpy(got.data(), d.out.p, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess) << what;
  ASSERT_EQ(cudaMemcpy(got_lse.data(), d.lse.p, got_lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess) << what;
  std::vector<std::uint8_t> ref_out;
  std::vector<float> ref_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(DType::kFloat32, ref_out, ref_lse)).ok()) << what;
  const std::vector<float> ref = widen(ref_out, DType::kFloat32);
  if (mode == turboquant::cuda::CudaMode::kStrict) {
    EXPECT_EQ(first_difference(ref.data(), got.data(), ref.size() * 4), -1) << what;
    EXPECT_EQ(first_difference(ref_lse.data(), got_lse.data(), ref_lse.size() * 4), -1) << what;
  } else {
    EXPECT_LE(rel_l2(got, ref), 1e-3) << what;
  }
}

}  // namespace tq_gpu_test

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
