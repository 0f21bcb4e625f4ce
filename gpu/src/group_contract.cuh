// The contract's reductions evaluated by the group of lanes that encodes or
// dequantizes one (token, KV head) record (encode.cuh, dequantize.cuh). The
// group has kLanes = D/32 lanes; lane `sub` holds, of every 16-dim row r, the
// kRun = 16/kLanes contiguous dims 16r + kRun*sub + e (e < kRun), as element
// r*kRun + e of its 32-element arrays. So a row's share
// is one vector load, and a lane owns whole dot-lanes of core::dot16 (dot-lane
// j sums the dims == j mod 16; the lane holds j = kRun*sub + e). Each function
// gives exactly the bits of its core/ counterpart:
//   group_dot16    core::dot16: the kRun dot-lane chains in registers, in row
//                  order; the tree's steps of width >= kRun are xor shuffles
//                  (fp add is commutative, so both lanes of a pair get the same
//                  sum and every lane ends with the total), the rest in registers.
//   group_fwht     core::fwht: the same butterflies, stage by stage (h = 1, 2,
//                  ...); stages inside a run or across rows pair registers, the
//                  others pair lanes.
//   group_min_max  the sequential scans of core::value_params.
#pragma once

#include <cstdint>

#include "turboquant/core/float_ops.hpp"

namespace turboquant::cuda::detail {

template <int D>
struct RecordGroup {
  static constexpr int kLanes = D / 32;
  static constexpr int kRun = 16 / kLanes;  // contiguous dims per lane and row
  static constexpr int kRows = D / 16;
  static constexpr int kElems = kRows * kRun;  // 32
  static constexpr int kChunkDims = D / kLanes;  // 32: the dims a lane packs and stores
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");

  __device__ static int dim(int sub, int x) { return 16 * (x / kRun) + kRun * sub + x % kRun; }
  __device__ static unsigned mask(int lane) { return ((1u << kLanes) - 1u) << (lane & ~(kLanes - 1)); }
};

template <int D>
__device__ __forceinline__ float group_dot16(const float (&a)[RecordGroup<D>::kElems],
                                             const float (&b)[RecordGroup<D>::kElems], unsigned mask) {
  using G = RecordGroup<D>;
  float acc[G::kRun];
#pragma unroll
  for (int e = 0; e < G::kRun; ++e) acc[e] = 0.0f;
#pragma unroll
  for (int x = 0; x < G::kElems; ++x) acc[x % G::kRun] = core::fma_rn(a[x], b[x], acc[x % G::kRun]);
#pragma unroll
  for (int w = 8; w >= 1; w >>= 1) {  // the contract's tree: lane j += lane j + w
    if (w >= G::kRun) {
#pragma unroll
      for (int e = 0; e < G::kRun; ++e) acc[e] = core::add_rn(acc[e], __shfl_xor_sync(mask, acc[e], w / G::kRun));
    } else {
#pragma unroll
      for (int e = 0; e < w; ++e) acc[e] = core::add_rn(acc[e], acc[e + w]);
    }
  }
  return acc[0];
}

template <int D>
__device__ __forceinline__ void group_fwht(float (&x)[RecordGroup<D>::kElems], int sub, unsigned mask) {
  using G = RecordGroup<D>;
#pragma unroll
  for (int h = 1; h < D; h <<= 1) {
    if (h < G::kRun || h >= 16) {
      // Registers: element stride h inside a run, or h/16 rows.
      const int stride = h < G::kRun ? h : (h / 16) * G::kRun;
#pragma unroll
      for (int i = 0; i < G::kElems; ++i) {
        const bool lower = h < G::kRun ? (i % G::kRun & h) == 0 : ((i / G::kRun) & (h / 16)) == 0;
        if (!lower) continue;
        const float a = x[i];
        const float b = x[i + stride];
        x[i] = core::add_rn(a, b);
        x[i + stride] = core::sub_rn(a, b);
      }
    } else {
      // Lanes: the lower dim's lane keeps a + b, the upper's a - b. fma(+-1, x,
      // other) rounds other +- x once: add_rn(x, other) or sub_rn(other, x).
      const float sign = (sub & (h / G::kRun)) == 0 ? 1.0f : -1.0f;
#pragma unroll
      for (int i = 0; i < G::kElems; ++i) {
        x[i] = core::fma_rn(sign, x[i], __shfl_xor_sync(mask, x[i], h / G::kRun));
      }
    }
  }
}

// The sign-exact zero a scan settles on when the extreme is zero: the first
// (lowest-dim) zero of the vector. Only called when the extreme is +-0.
template <int D>
__device__ float group_first_zero(const float (&v)[RecordGroup<D>::kElems], int sub, unsigned mask) {
  using G = RecordGroup<D>;
  int at = D;  // none
  float zero = 0.0f;
#pragma unroll
  for (int x = G::kElems - 1; x >= 0; --x) {  // dims increase with x inside a lane
    if (v[x] == 0.0f) {
      at = G::dim(sub, x);
      zero = v[x];
    }
  }
#pragma unroll
  for (int width = 1; width < G::kLanes; width <<= 1) {
    const int other_at = __shfl_xor_sync(mask, at, width);
    const float other_zero = __shfl_xor_sync(mask, zero, width);
    if (other_at < at) {
      at = other_at;
      zero = other_zero;
    }
  }
  return zero;
}

// core::value_params' scans `v[d] < mn ? v[d] : mn` and `v[d] > mx ? v[d] : mx`
// from v[0]: NaN when v[0] is NaN, else the extreme of the non-NaN values and,
// among equal values, the first; that choice only shows for zeros of both
// signs, which take the slow path. fminf/fmaxf skip NaN operands.
template <int D>
__device__ __forceinline__ float2 group_min_max(const float (&v)[RecordGroup<D>::kElems], int sub, unsigned mask,
                                                int leader) {
  using G = RecordGroup<D>;
  float mn = v[0];
  float mx = v[0];
#pragma unroll
  for (int x = 1; x < G::kElems; ++x) {
    mn = fminf(mn, v[x]);
    mx = fmaxf(mx, v[x]);
  }
#pragma unroll
  for (int width = 1; width < G::kLanes; width <<= 1) {
    mn = fminf(mn, __shfl_xor_sync(mask, mn, width));
    mx = fmaxf(mx, __shfl_xor_sync(mask, mx, width));
  }
  const float first = __shfl_sync(mask, v[0], leader);  // dim 0: lane sub 0, element 0
  if (first != first) return make_float2(first, first);
  if (mn == 0.0f) mn = group_first_zero<D>(v, sub, mask);  // group-uniform branch
  if (mx == 0.0f) mx = group_first_zero<D>(v, sub, mask);
  return make_float2(mn, mx);
}

}  // namespace turboquant::cuda::detail
