// The fast decode's per-warp work: the block's setup (pair table, query B
// fragments) and the main loop's step for one staged tile: scores S^T = K Q^T,
// the online softmax (base 2) per query head, and O^T += V^T P^T. T is a
// FastTraits; the stage reader (fast_stage.cuh) knows the cache layout.
#pragma once

#include <cstdint>

#include "fast_columns.cuh"
#include "fast_fragments.cuh"
#include "fast_stage.cuh"
#include "fast_traits.cuh"
#include "query_prep.cuh"
#include "turboquant/core/softmax.hpp"

namespace turboquant::cuda::detail {

// Pair table: entry e -> (c[e & mask], c[e >> KB]) as fp16x2, in interleaved
// copies; c = p.codebook.centroids, which the fast plan scales (params.hpp). `centroid_half` is 16 words of shared memory. The caller's next
// block barrier publishes the table. kBlockThreads: the threads of the block
// (every one calls it).
template <class T, int kBlockThreads = T::kThreads>
__device__ __forceinline__ void build_pair_table(const DecodeParams& p, std::uint8_t* lut,
                                                 std::uint32_t* centroid_half, int tid) {
  constexpr int KB = T::kKeyBits;
  if (tid < (1 << KB)) {
    float cv = 0.0f;
#pragma unroll
    for (int k = 0; k < (1 << KB); ++k) cv = k == tid ? p.codebook.centroids[k] : cv;
    centroid_half[tid] = pack_half2(cv, 0.0f);
  }
  __syncthreads();
  uint4* lut128 = reinterpret_cast<uint4*>(lut);  // four copies per store
  for (int i = tid; i < T::kLutEntries * T::kLutCopies / 4; i += kBlockThreads) {
    const int e = i / (T::kLutCopies / 4);
    const std::uint32_t v = centroid_half[e & ((1 << KB) - 1)] | (centroid_half[e >> KB] << 16);
    lut128[i] = make_uint4(v, v, v, v);
  }
}

__device__ __forceinline__ float prepared_value(float v) { return v; }
__device__ __forceinline__ float prepared_value(__half v) { return __half2float(v); }  // exact

// This lane's B fragments of Q^T from the prepared query q[kColumns][D] (fp32,
// or fp16: prepare_warp_query_rows, the same fragments): in column tile n,
// column 8n + g, the lane's key dims (T::key_dim) 4ks + {0, 1} and {2, 3};
// columns past `columns` are zero.
template <class T, class E>
__device__ __forceinline__ void query_fragments(const E* prep, int columns, int g, int c,
                                                std::uint32_t (&qb)[T::kColumnTiles][T::kKSteps][2]) {
  auto q2 = [](const E* q, int d0, int d1) { return pack_half2(prepared_value(q[d0]), prepared_value(q[d1])); };
#pragma unroll
  for (int n = 0; n < T::kColumnTiles; ++n) {
    const int column = T::kHeads * n + g;
    const E* q = prep + column * T::kDim;
#pragma unroll
    for (int ks = 0; ks < T::kKSteps; ++ks) qb[n][ks][0] = qb[n][ks][1] = 0u;
    if (column < columns) {
#pragma unroll
      for (int ks = 0; ks < T::kKSteps; ++ks) {
        qb[n][ks][0] = q2(q, T::key_dim(c, 4 * ks), T::key_dim(c, 4 * ks + 1));
        qb[n][ks][1] = q2(q, T::key_dim(c, 4 * ks + 2), T::key_dim(c, 4 * ks + 3));
      }
    }
  }
}

// One warp's online-softmax state over its tiles for one column tile, per
// lane: the O^T fragments (dim row g, columns 2c, 2c+1), (dim row g + 8,
// columns 2c, 2c+1) and, for columns 2c and 2c + 1, the running max and this
// lane's shares of the sum and of sum p * zero.
template <class T>
struct FastWarpState {
  float o[T::kMTiles][4];
  float m0, m1;
  float l0, l1;
  float z0, z1;

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    m0 = m1 = -core::kInf;
    l0 = l1 = 0.0f;
    z0 = z1 = 0.0f;
  }
};

// Completes the lanes' shares of the sums (l0, l1, z0, z1 of a FastWarpState
// or WideRowState) over the lanes that differ in the xor masks kFirst, 2 kFirst, .. kLast.
template <int kFirst, int kLast, class State>
__device__ __forceinline__ void sum_lane_shares(State& w) {
#pragma unroll
  for (int x = kFirst; x <= kLast; x <<= 1) {
    w.l0 += __shfl_xor_sync(0xffffffffu, w.l0, x);
    w.l1 += __shfl_xor_sync(0xffffffffu, w.l1, x);
    w.z0 += __shfl_xor_sync(0xffffffffu, w.z0, x);
    w.z1 += __shfl_xor_sync(0xffffffffu, w.z1, x);
  }
}

// What the tile step needs besides the staged tile: the pair table, this
// lane's copy offset in it, the query's B fragments per column tile and the
// block's column mask.
template <class T>
struct FastTileInputs {
  const std::uint8_t* lut;
  std::uint32_t lut_lane_off;
  const std::uint32_t (&qb)[T::kColumnTiles][T::kKSteps][2];
  FastColumnMask mask;
};

// The squared centroid norms of a tile's tokens (the AoS norm correction), as
// (K o K) 1: the key fragments' squares summed over groups of 4 k-steps in fp16
// (sums of 4 squares, relative error < 2e-3 each), then times a B of ones,
// summed in fp32 by one mma per group (the Gram blocks K K^T, whose diagonals
// hold the same sums, took two per k-step). Called for k-steps 0, 1, ... with
// the step's fragment a; sq[0] ends as token g's sum, sq[2] as token g + 8's.
template <class T>
__device__ __forceinline__ void add_squares(float (&sq)[4], uint4& squares, const uint4& a, int ks) {
  constexpr int kSquareSteps = 4;
  squares = ks % kSquareSteps == 0 ? square_half2(a) : square_add_half2(a, squares);
  if (ks % kSquareSteps == kSquareSteps - 1 || ks == T::kKSteps - 1) {
    constexpr std::uint32_t kOnes = 0x3C003C00u;  // fp16x2 (1, 1)
    mma_16816(sq, squares, kOnes, kOnes);
  }
}

// The online softmax (base 2) of one column tile's scores s (tokens g, g + 8;
// columns 2c, 2c + 1) folded into w: on return s holds the probabilities.
// The column max spans the 8 lanes of a c.
template <class T>
__device__ __forceinline__ void fast_softmax_step(FastWarpState<T>& w, float (&s)[4], float zero0, float zero1) {
  float mx0 = fmaxf(s[0], s[2]);
  float mx1 = fmaxf(s[1], s[3]);
  // Past a split's first tiles a tile seldom raises a column's running max:
  // when no lane's scores do, the reference stays, alpha is 1 and the
  // reduction over the column's 8 lanes (three shuffle levels per column
  // pair) is skipped. The same numbers as the full step (exp2(0) = 1).
  if (__all_sync(0xffffffffu, mx0 <= w.m0 && mx1 <= w.m1)) {
    const float ref0 = core::softmax_reference(w.m0);
    const float ref1 = core::softmax_reference(w.m1);
    s[0] = fast_exp2(s[0] - ref0);
    s[1] = fast_exp2(s[1] - ref1);
    s[2] = fast_exp2(s[2] - ref0);
    s[3] = fast_exp2(s[3] - ref1);
    w.l0 += s[0] + s[2];
    w.l1 += s[1] + s[3];
    w.z0 += s[0] * zero0 + s[2] * zero1;
    w.z1 += s[1] * zero0 + s[3] * zero1;
    return;
  }
#pragma unroll
  for (int x = 4; x <= 16; x <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
  }
  const float new0 = fmaxf(w.m0, mx0);
  const float new1 = fmaxf(w.m1, mx1);
  const float ref0 = core::softmax_reference(new0);
  const float ref1 = core::softmax_reference(new1);
  const float alpha0 = fast_exp2(w.m0 - ref0);
  const float alpha1 = fast_exp2(w.m1 - ref1);
  w.m0 = new0;
  w.m1 = new1;
  s[0] = fast_exp2(s[0] - ref0);
  s[1] = fast_exp2(s[1] - ref1);
  s[2] = fast_exp2(s[2] - ref0);
  s[3] = fast_exp2(s[3] - ref1);
  w.l0 = w.l0 * alpha0 + (s[0] + s[2]);
  w.l1 = w.l1 * alpha1 + (s[1] + s[3]);
  w.z0 = w.z0 * alpha0 + (s[0] * zero0 + s[2] * zero1);
  w.z1 = w.z1 * alpha1 + (s[1] * zero0 + s[3] * zero1);
  if (__any_sync(0xffffffffu, alpha0 != 1.0f || alpha1 != 1.0f)) {
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) {
      w.o[j][0] *= alpha0;
      w.o[j][1] *= alpha1;
      w.o[j][2] *= alpha0;
      w.o[j][3] *= alpha1;
    }
  }
}

// Folds the staged tile `st` (first token at position tok0; its first `valid`
// tokens count), read through `stage`, into the column tiles' states `w`:
// every key and value fragment is dequantized once and feeds one mma per
// column tile.
template <class T, bool kRows, class Stage>
__device__ __forceinline__ void fast_tile(FastWarpState<T> (&w)[T::kColumnTiles], const FastTileInputs<T>& in,
                                          const Stage& stage, const std::uint8_t* st, int tok0, int valid, int g,
                                          int c) {
  constexpr int NT = T::kColumnTiles;
  // S^T = K Q^T: rows tokens g, g + 8; columns 2c, 2c + 1 of each column tile.
  std::uint32_t kw[2][T::kKeyWords];
  stage.load_keys(st, kw);
  // Two accumulator chains (even and odd k-steps) halve the dependent mma latency.
  float s[NT][4], s_odd[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[n][i] = s_odd[n][i] = 0.0f;
  }
  // T::kNormFromSquares: the tokens' squared centroid norms (add_squares).
  float sq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 squares;
#pragma unroll
  for (int ks = 0; ks < T::kKSteps; ++ks) {
    uint4 a;
    key_fragment<T::kKeyBits, T::kLutShift, T::kFp8Format>(kw[0], ks, in.lut, in.lut_lane_off, a.x, a.z);
    key_fragment<T::kKeyBits, T::kLutShift, T::kFp8Format>(kw[1], ks, in.lut, in.lut_lane_off, a.y, a.w);
#pragma unroll
    for (int n = 0; n < NT; ++n) mma_16816(ks % 2 ? s_odd[n] : s[n], a, in.qb[n][ks][0], in.qb[n][ks][1]);
    if constexpr (T::kNormFromSquares) add_squares<T>(sq, squares, a, ks);
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[n][i] += s_odd[n][i];
  }
  float scale0, scale1, zero0, zero1;
  stage.value_meta(st, scale0, scale1, zero0, zero1);
  if constexpr (!T::kFp8) {
    float n0, n1;
    stage.key_norms(st, sq, n0, n1);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      s[n][0] *= n0;
      s[n][1] *= n0;
      s[n][2] *= n1;
      s[n][3] *= n1;
    }
  }
  // One branch for the whole tail (a second one per tile cost 2-3% of the
  // single-token time on SoA 4bit_nc and 3bit_nc, PERFORMANCE.md round 13).
  if (valid < T::kTile) {  // the split's last tile: tokens past its end weigh nothing
    if (g >= valid) {
      scale0 = zero0 = 0.0f;
#pragma unroll
      for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = -core::kInf;
    }
    if (g + 8 >= valid) {
      scale1 = zero1 = 0.0f;
#pragma unroll
      for (int n = 0; n < NT; ++n) s[n][2] = s[n][3] = -core::kInf;
    }
  }
  std::uint32_t pb0[NT], pb1[NT];
  // Multi-token rows and windows: tokens a column does not attend to weigh
  // nothing for it (every column tile drops the same metadata). Whether the
  // tile needs masks is the block's question (the range all its columns
  // attend to), asked once.
  bool masked = false;
  if constexpr (kRows) masked = in.mask.needed(tok0, T::kTile);
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    if (masked) in.mask.apply(n, c, tok0 + g, s[n], scale0, zero0, scale1, zero1);
    fast_softmax_step<T>(w[n], s[n], zero0, zero1);
  }
  // O^T += V^T (P^T * scale). B: tokens 2c, 2c+1 | 8+2c, 9+2c (k) x column g (n).
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    pb0[n] = transpose_8x8(pack_half2(s[n][0] * scale0, s[n][1] * scale0));
    pb1[n] = transpose_8x8(pack_half2(s[n][2] * scale1, s[n][3] * scale1));
  }
  std::uint32_t vw[4][T::kValueWords];
  stage.load_values(st, vw);
#pragma unroll
  for (int j = 0; j < T::kMTiles; ++j) {
    const uint4 a = make_uint4(value_fragment<T::kValueBits>(vw[0], vw[1], 2 * j), value_fragment<T::kValueBits>(vw[0], vw[1], 2 * j + 1),
                               value_fragment<T::kValueBits>(vw[2], vw[3], 2 * j), value_fragment<T::kValueBits>(vw[2], vw[3], 2 * j + 1));
#pragma unroll
    for (int n = 0; n < NT; ++n) mma_16816(w[n].o[j], a, pb0[n], pb1[n]);
  }
}

}  // namespace turboquant::cuda::detail
