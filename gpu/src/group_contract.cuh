// The contract's reductions evaluated by a group of 8 lanes (one token-head of
// the encoder). Element i of a lane with group position `sub` is dim
// sub + 8 i. Each function gives exactly the bits of its core/ counterpart:
//   group_dot16  core::dot16: dot-lane j accumulates dims j, j+16, ... by fma
//                from +0 in order; the 8 lanes hold dot-lanes sub (even i) and
//                sub + 8 (odd i), so the tree's first step (j + 8) is in
//                registers and the rest (4, 2, 1) are xor shuffles; fp add is
//                commutative, so both lanes of a pair get the same sum.
//   group_fwht   core::fwht: the same butterflies, stage by stage; stages
//                h < 8 pair lanes (xor shuffles), stages h >= 8 pair registers.
//   group_min/max the sequential `v[d] < mn ? v[d] : mn` scan of
//                core::value_params: the first index holding the extreme
//                non-NaN value, or NaN when v[0] is NaN.
#pragma once

#include <cstdint>

#include "turboquant/core/float_ops.hpp"

namespace turboquant::cuda::detail {

inline constexpr int kGroupLanes = 8;

template <int E>
__device__ __forceinline__ float group_dot16(const float (&a)[E], const float (&b)[E], unsigned mask) {
  static_assert(E % 2 == 0, "dims must be a multiple of 16");
  float even = 0.0f;  // dot-lane sub
  float odd = 0.0f;   // dot-lane sub + 8
#pragma unroll
  for (int i = 0; i < E; i += 2) {
    even = core::fma_rn(a[i], b[i], even);
    odd = core::fma_rn(a[i + 1], b[i + 1], odd);
  }
  float r = core::add_rn(even, odd);
#pragma unroll
  for (int width = 4; width >= 1; width >>= 1) r = core::add_rn(r, __shfl_xor_sync(mask, r, width));
  return r;
}

template <int E>
__device__ __forceinline__ void group_fwht(float (&x)[E], int sub, unsigned mask) {
#pragma unroll
  for (int h = 1; h < kGroupLanes; h <<= 1) {
    const bool lower = (sub & h) == 0;
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const float other = __shfl_xor_sync(mask, x[i], h);
      x[i] = lower ? core::add_rn(x[i], other) : core::sub_rn(other, x[i]);
    }
  }
#pragma unroll
  for (int h = 1; h < E; h <<= 1) {  // dim stride 8h
#pragma unroll
    for (int i = 0; i < E; ++i) {
      if (i & h) continue;
      const float a = x[i];
      const float b = x[i + h];
      x[i] = core::add_rn(a, b);
      x[i + h] = core::sub_rn(a, b);
    }
  }
}

// kMin: the scan `v[d] < best`; else `v[d] > best`.
template <bool kMin, int E>
__device__ __forceinline__ float group_extreme(const float (&v)[E], int sub, unsigned mask, int leader) {
  constexpr int kNone = 0x7fffffff;
  float best = 0.0f;
  int at = kNone;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const bool better = kMin ? v[i] < best : v[i] > best;
    if (v[i] == v[i] && (at == kNone || better)) {
      best = v[i];
      at = sub + kGroupLanes * i;
    }
  }
#pragma unroll
  for (int width = 1; width < kGroupLanes; width <<= 1) {
    const float ob = __shfl_xor_sync(mask, best, width);
    const int oa = __shfl_xor_sync(mask, at, width);
    const bool better = kMin ? ob < best : ob > best;
    if (oa != kNone && (at == kNone || better || (ob == best && oa < at))) {
      best = ob;
      at = oa;
    }
  }
  const float first = __shfl_sync(mask, v[0], leader);  // v[0] of the group (lane sub 0, i 0)
  return first != first ? first : best;
}

}  // namespace turboquant::cuda::detail
