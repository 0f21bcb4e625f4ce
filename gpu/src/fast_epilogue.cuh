// The fast decode's epilogue: the block's warps combine their online-softmax
// states into the split's partial (max, sum, acc) in the workspace, the same
// format as the strict kernels; merge_kernel finishes.
#pragma once

#include <cstdint>

#include "fast_mainloop.cuh"

namespace turboquant::cuda::detail {

// Where the block's columns go: partials (row_of(h), split) for h < columns.
struct FastPartialTarget {
  int split;
  int columns;
};

// Fragment (column tile n, m-tile j) of lane ln of a warp's state, rescaled by
// the columns' factors f0, f1 (value scale 2^k undone, zero-point term added):
// (column 2c dim d, column 2c + 1 dim d, column 2c dim d + 1, column 2c + 1
// dim d + 1), d = value_dim(ln / 4, 2j), c = ln % 4.
template <class T>
__device__ __forceinline__ float4 rescaled_fragment(const FastWarpState<T>& w, int j, float f0, float f1) {
  const float inv_lo = 1.0f / value_frag_scale<T::kValueBits>(2 * j);  // exact: powers of two
  const float inv_hi = 1.0f / value_frag_scale<T::kValueBits>(2 * j + 1);
  return make_float4(f0 * (w.o[j][0] * inv_lo + w.z0), f1 * (w.o[j][1] * inv_lo + w.z1),
                     f0 * (w.o[j][2] * inv_hi + w.z0), f1 * (w.o[j][3] * inv_hi + w.z1));
}

// Stores fragment (column tile n, m-tile j) of lane ln (rescaled_fragment's
// order) into the split's partial accumulators: columns 8n + 2(ln%4) and the
// next; local value dims 2j, 2j + 1 of lane group ln/4, adjacent dims of the
// output.
template <class T, class RowOf>
__device__ __forceinline__ void store_partial_fragment(const DecodeParams& p, const FastPartialTarget& out,
                                                       RowOf row_of, int n, int j, int ln, float4 v) {
  const core::PartialLayout pl = p.partials(T::kDim);
  const int h = T::kHeads * n + 2 * (ln & 3);
  const int d0 = T::value_dim(ln >> 2, 2 * j);
  if (h < out.columns) {
    float* dst = p.partial_acc + pl.acc_offset(row_of(h), out.split) + d0;
    dst[0] = v.x;
    dst[1] = v.z;
  }
  if (h + 1 < out.columns) {
    float* dst = p.partial_acc + pl.acc_offset(row_of(h + 1), out.split) + d0;
    dst[0] = v.y;
    dst[1] = v.w;
  }
}

// A block of fused heads (one KV head a warp, fast_decode.cuh): each warp's
// state is its columns' partial, written by the warp alone (no block barrier).
template <class T, class RowOf>
__device__ __forceinline__ void fast_write_warp_partial(const DecodeParams& p,
                                                        FastWarpState<T> (&state)[T::kColumnTiles],
                                                        const FastPartialTarget& out, RowOf row_of, int lane) {
  const int g = lane >> 2;
  const int c = lane & 3;
  pdl_launch_dependents();
#pragma unroll
  for (int n = 0; n < T::kColumnTiles; ++n) {
    FastWarpState<T>& w = state[n];
    sum_lane_shares<4, 16>(w);
    const float f0 = w.m0 == -core::kInf ? 0.0f : 1.0f;
    const float f1 = w.m1 == -core::kInf ? 0.0f : 1.0f;
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) {
      store_partial_fragment<T>(p, out, row_of, n, j, lane, rescaled_fragment(w, j, f0, f1));
    }
    const int k = T::kHeads * n + 2 * c;
    const core::PartialLayout pl = p.partials(T::kDim);
    if (g == 0 && k < out.columns) {
      float* ml = p.partial_ml + pl.ml_offset(row_of(k), out.split);
      ml[0] = w.m0;
      ml[1] = f0 * w.l0;
    }
    if (g == 0 && k + 1 < out.columns) {
      float* ml = p.partial_ml + pl.ml_offset(row_of(k + 1), out.split);
      ml[0] = w.m1;
      ml[1] = f1 * w.l1;
    }
  }
}

// Every thread of the block calls it once its warp's loop is done and its
// copies have landed: the block's warps of each of its kKvHeads KV heads
// (warp w: head w % kKvHeads) combine into that head's partial.
// `work` is the pipeline region (reused for the warps' fragments); warp_max
// and warp_sum are [kWarps][kColumns] of shared memory; row_of(h, k): the
// head row of column k of the block's KV head h.
template <class T, int kKvHeads, class RowOf>
__device__ __forceinline__ void fast_write_partial(const DecodeParams& p, FastWarpState<T> (&state)[T::kColumnTiles],
                                                   const FastPartialTarget& out, RowOf row_of, std::uint8_t* work,
                                                   float (*warp_max)[T::kColumns], float (*warp_sum)[T::kColumns],
                                                   int tid) {
  constexpr int NT = T::kColumnTiles;
  constexpr int kHeadWarps = T::kWarps / kKvHeads;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int head = warp % kKvHeads;
  const int g = lane >> 2;
  const int c = lane & 3;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    FastWarpState<T>& w = state[n];
    sum_lane_shares<4, 16>(w);  // column sums span the 8 lanes of a c
    if (g == 0) {
      const int k = T::kHeads * n + 2 * c;
      warp_max[warp][k] = w.m0;
      warp_max[warp][k + 1] = w.m1;
      warp_sum[warp][k] = w.l0;
      warp_sum[warp][k + 1] = w.l1;
    }
  }
  __syncthreads();  // every warp is done with its pipeline stages and has posted its max
  pdl_launch_dependents();  // the merge grid may start launching (it waits for this grid)
  // Each warp stores its rescaled fragments (value scale 2^k undone, zero-point
  // term added) as one float4 per (column tile, m-tile, lane): conflict-free,
  // no serialization.
  float4* frag = reinterpret_cast<float4*>(work);  // [warps][column tiles][m-tiles][32]
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const FastWarpState<T>& w = state[n];
    const int k = T::kHeads * n + 2 * c;
    float big0 = -core::kInf, big1 = -core::kInf;
#pragma unroll
    for (int v = head; v < T::kWarps; v += kKvHeads) {
      big0 = fmaxf(big0, warp_max[v][k]);
      big1 = fmaxf(big1, warp_max[v][k + 1]);
    }
    const float f0 = w.m0 == -core::kInf ? 0.0f : fast_exp2(w.m0 - big0);
    const float f1 = w.m1 == -core::kInf ? 0.0f : fast_exp2(w.m1 - big1);
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) {
      frag[((warp * NT + n) * T::kMTiles + j) * 32 + lane] = rescaled_fragment(w, j, f0, f1);
    }
  }
  __syncthreads();
  const core::PartialLayout pl = p.partials(T::kDim);
  constexpr int kFragsPerWarp = NT * T::kMTiles * 32;
  for (int i = tid; i < kKvHeads * kFragsPerWarp; i += T::kThreads) {
    const int h = i / kFragsPerWarp;  // the head's warps: h, h + kKvHeads, ...
    const int f = i % kFragsPerWarp;
    const int n = f / (T::kMTiles * 32);
    const int j = f / 32 % T::kMTiles;
    const int ln = f % 32;
    float4 v = frag[h * kFragsPerWarp + f];
#pragma unroll
    for (int u = 1; u < kHeadWarps; ++u) {
      const float4 x = frag[(h + u * kKvHeads) * kFragsPerWarp + f];
      v.x += x.x;
      v.y += x.y;
      v.z += x.z;
      v.w += x.w;
    }
    store_partial_fragment<T>(p, out, [&](int k) { return row_of(h, k); }, n, j, ln, v);
  }
  // One thread a (head, column). As a loop over them (one trip at most) this
  // made ptxas spill 16 bytes into the tile loop of the twelve-warp instances
  // (two local loads a tile), which an if does not.
  static_assert(kKvHeads * T::kColumns <= T::kThreads, "a thread for each (head, column)");
  if (tid < kKvHeads * out.columns) {
    const int h = tid / out.columns;
    const int k = tid % out.columns;
    float big = -core::kInf;
    for (int v = h; v < T::kWarps; v += kKvHeads) big = fmaxf(big, warp_max[v][k]);
    float sum = 0.0f;
    for (int v = h; v < T::kWarps; v += kKvHeads) {
      const float m = warp_max[v][k];
      sum += m == -core::kInf ? 0.0f : fast_exp2(m - big) * warp_sum[v][k];
    }
    float* ml = p.partial_ml + pl.ml_offset(row_of(h, k), out.split);
    ml[0] = big;
    ml[1] = sum;
  }
}

}  // namespace turboquant::cuda::detail
