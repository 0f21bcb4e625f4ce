// The merge kernel (the strict instances are the generated
// strict_kernels_d<D>.cu). Compiled with --fmad=false: nothing here may be
// contracted behind the contract's back.
#include "launch.hpp"
#include "merge.cuh"

namespace turboquant::cuda::detail {

cudaError_t launch_merge(const DecodeParams& p, bool tile_aligned, cudaStream_t stream) {
  const dim3 grid(p.num_q_heads, p.rows);
  const int dims = p.layout.format.head_dim;
  // Programmatic dependent launch: the merge's launch overlaps the decode's tail
  // (merge_kernel waits on griddepcontrol before reading the partials).
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(dims);
  config.dynamicSmemBytes = static_cast<std::size_t>(merge_smem_bytes(p.plan_splits, dims));
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, merge_kernel, p, tile_aligned);
}

}  // namespace turboquant::cuda::detail
