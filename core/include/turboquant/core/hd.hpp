// Host/device portability: every function in core/ is compiled by g++ for the
// CPU backends and by nvcc for the CUDA kernels, so both call the same code for
// every address and every bit.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TQ_HD __host__ __device__ __forceinline__
#else
#define TQ_HD inline
#endif

#if defined(__CUDA_ARCH__)
#define TQ_ON_DEVICE 1
#else
#define TQ_ON_DEVICE 0
#endif

// Internal invariants (never user input: that is validated and reported as a
// Status before any kernel runs).
#if TQ_ON_DEVICE || defined(NDEBUG)
#define TQ_ASSERT(cond) ((void)0)
#else
#include <cassert>
#define TQ_ASSERT(cond) assert(cond)
#endif
