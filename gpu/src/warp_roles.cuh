// Blocks whose warpgroups take different roles (wide_specialized.cuh): named
// barriers between the groups, and the moving of registers from one group to
// another (sm_90a).
#pragma once

namespace turboquant::cuda::detail {

// Barrier `id` (1..15; 0 is __syncthreads') of `threads` threads (a multiple
// of 32), counted over the warps that sync or arrive. sync waits for the
// count; arrive counts without waiting. Both order the calling threads'
// earlier memory accesses before the waiting threads' later ones.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The calling warpgroup's registers a thread, lowered to or raised to N (a
// multiple of 8 in [24, 256]); every warp of the group calls it. Raising
// waits until other groups have lowered theirs enough. Only on sm_90a: other
// targets keep the launch's count.
template <int N>
__device__ __forceinline__ void warpgroup_lower_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void warpgroup_raise_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace turboquant::cuda::detail
