// Instantiations and launchers: strict decode and the merge (compiled with
// --fmad=false: nothing here may be contracted behind the contract's back).
#include "launch.hpp"
#include "merge.cuh"
#include "strict_decode.cuh"

namespace turboquant::cuda::detail {

template <int D>
static cudaError_t launch_strict(const DecodeParams& p, cudaStream_t stream) {
  const dim3 grid(p.num_splits, p.layout.num_kv_heads * p.chunks_per_kv_head, p.batch);
  strict_decode_kernel<D><<<grid, kStrictThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_strict_decode(const DecodeParams& p, cudaStream_t stream) {
  switch (p.layout.format.head_dim) {
    case 64: return launch_strict<64>(p, stream);
    case 128: return launch_strict<128>(p, stream);
    case 256: return launch_strict<256>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_merge(const DecodeParams& p, bool tile_aligned, cudaStream_t stream) {
  const dim3 grid(p.num_q_heads, p.batch);
  merge_kernel<<<grid, 128, p.num_splits * sizeof(float), stream>>>(p, tile_aligned);
  return cudaGetLastError();
}

}  // namespace turboquant::cuda::detail
