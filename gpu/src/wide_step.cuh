// The wide kernels' shared pieces (wide_decode.cuh's four-warp blocks and
// wide_specialized.cuh's warpgroups in roles): a block's work, the lane's row
// state, query fragments and masks, one 64-token step (S = Q K^T, the online
// softmax, O += P V), and the partials' write at the end.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fast_columns.cuh"
#include "fast_mainloop.cuh"
#include "query_prep.cuh"
#include "wgmma.cuh"
#include "wide_tiles.cuh"

namespace turboquant::cuda::detail {

// One warp's rows (columns of the decode) g and g + 8: their online softmax
// state and O fragments (n-tile nt: V^T rows 8 nt + 2c, + 1).
template <int D>
struct WideRowState {
  float o[D / 8][4];
  float m0, m1, l0, l1, z0, z1;
};

template <int D>
__device__ __forceinline__ void wide_clear_state(WideRowState<D>& w) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n) w.o[n][0] = w.o[n][1] = w.o[n][2] = w.o[n][3] = 0.0f;
  w.m0 = w.m1 = -core::kInf;
  w.l0 = w.l1 = w.z0 = w.z1 = 0.0f;
}

// The lane's A fragments of S from the prepared columns prep[kWideColumns][D]
// (fp32): (row g, K columns 16 ks + 2c, + 1), (row g + 8, ...), then + 8:
// wide_key_column's dims, key_dim(c, 4 ks + {0, 1}) and (c, 4 ks + {2, 3});
// k0, k1: the lane's two columns (zero past the block's).
template <class T>
__device__ __forceinline__ void wide_query_fragments(const float* prep, const FastColumns& cols, int k0, int k1, int c,
                                                     std::uint32_t (&qa)[T::kKSteps][4]) {
  constexpr int D = T::kDim;
#pragma unroll
  for (int ks = 0; ks < T::kKSteps; ++ks) {
    auto q2 = [&](int k, int j) {
      return k < cols.count ? pack_half2(prep[k * D + T::key_dim(c, j)], prep[k * D + T::key_dim(c, j + 1)]) : 0u;
    };
    qa[ks][0] = q2(k0, 4 * ks);
    qa[ks][1] = q2(k1, 4 * ks);
    qa[ks][2] = q2(k0, 4 * ks + 2);
    qa[ks][3] = q2(k1, 4 * ks + 2);
  }
}

// A wide block's work: its rows (of grid z), its split's token range, its
// columns and 64-token steps. False: nothing to do (the block returns).
struct WideWork {
  FastRows rows;
  core::TokenRange range;
  FastColumns cols;
  int steps;
};
template <class T>
__device__ __forceinline__ bool wide_work(const DecodeParams& p, int split, int kv_head, WideWork& w) {
  w.rows = fast_rows_of_block(p, blockIdx.z);
  if (w.rows.count == 0) return false;
  w.range = w.rows.split_range(p.plan_splits, split);
  if (w.range.empty()) return false;
  w.cols = fast_columns(p, w.rows, kv_head, 0);
  const int num_tiles = (w.range.size() + T::kTile - 1) / T::kTile;
  w.steps = (num_tiles + kWideWarps - 1) / kWideWarps;
  return true;
}

// The attended ranges of a lane's two rows (their columns' query rows), and
// the range every column of the block attends to (a step inside it and the
// split needs no masking: most steps of a long sequence).
struct WideMask {
  int lo0, hi0, lo1, hi1;
  int all_begin, all_end;
  __device__ __forceinline__ bool needed(int step_tok, int step, int end) const {
    return step_tok < all_begin || step_tok + step > min(all_end, end);
  }
};

template <class T>
__device__ __forceinline__ WideMask wide_mask(const DecodeParams& p, const FastRows& rows, const FastColumns& cols,
                                              int k0, int k1) {
  const core::TokenRange r0 = column_range(p, rows, cols, k0), r1 = column_range(p, rows, cols, k1);
  const core::TokenRange all = columns_common_range(p, rows, cols);
  WideMask m{r0.begin, r0.end, r1.begin, r1.end, all.begin, all.end};
  if (k0 >= cols.count) m.lo0 = m.hi0 = 0;  // columns past the block's: no token
  if (k1 >= cols.count) m.lo1 = m.hi1 = 0;
  return m;
}

// Whether a step's O product stays in flight over the next step's
// dequantization. Not with FP8 keys on SoA: there ptxas gives P (O's A
// operand, registers) the registers of S's accumulators, so the next S product
// would write an operand still being read, and it serializes every wgmma of
// the kernel instead (C7515 in the build log: a wait after each of the 12
// products a step, at D 64 and 128, e4m3 and e4b15). Waiting for O at the end
// of the step keeps each product's k-steps pipelined. run_h200.sh's build step
// reports any C7514/C7515.
template <class T>
inline constexpr bool kWideOutputInFlight = !(T::kFp8 && !T::kAos);

// The warp's step over the 64 tokens from step_tok: S = Q K^T, the online
// softmax of its two rows per lane, O += (P * scale) V. after_scores() runs
// once S is in registers: with wgmma, when every earlier product of the warp
// (the previous step's O) has read its tiles.
// The query: the lane's A fragments (registers), or with wgmma the block's
// columns as a fp16 tile in K's layout (WideSmem::k_offset of (column, K
// column)), read through a descriptor.
template <class T, class Query, class AfterScores>
__device__ __forceinline__ void wide_step(WideRowState<T::kDim>& w, const Query& qa, const __half* k_tile,
                                          const __half* v_tile, const float* meta, int step_tok, int end,
                                          const WideMask& mask, int lane, AfterScores&& after_scores) {
  constexpr bool kQueryTile = std::is_same_v<Query, const __half*>;
  using S = WideSmem<T>;
  constexpr int kNT = S::kStep / 8;  // n-tiles of S
  static_assert(kNT % 2 == 0, "the max runs over n-tile pairs");
  const int c = lane & 3;
  float s[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#if TURBOQUANT_HAVE_WGMMA
  // The warpgroup's S (64 columns x 64 tokens), B = K through its descriptor.
  wgmma_fence();
  const std::uint64_t k_desc = wgmma_descriptor(k_tile, S::kKCoreStrideK, S::kCoreStrideN);
#pragma unroll
  for (int ks = 0; ks < T::kKSteps; ++ks) {
    const std::uint64_t b = wgmma_descriptor_advance(k_desc, 2 * S::k_offset(0, 16 * ks));
    if constexpr (kQueryTile) {
      static_assert(kNT == 8, "a query tile of 64 columns against 64 tokens");
      const std::uint64_t q_desc = wgmma_descriptor(qa, S::kKCoreStrideK, S::kCoreStrideN);
      wgmma_64x64x16_smem_a(s, wgmma_descriptor_advance(q_desc, 2 * S::k_offset(0, 16 * ks)), b, ks > 0);
    } else {
      wgmma_64xNx16<kNT>(s, qa[ks], b, ks > 0);
    }
  }
  wgmma_commit();
  wgmma_wait_all();  // also the previous step's O product
  wgmma_pin(s);
  wgmma_pin(w.o);
#else
  // B of S: K tokens 16 pr + 8 (lane / 16) + lane % 8, columns 16 ks + 8 ((lane / 8) % 2).
  const __half* k_lane = k_tile + S::k_offset(8 * (lane >> 4) + (lane & 7), 8 * ((lane >> 3) & 1));
#pragma unroll
  for (int ks = 0; ks < T::kKSteps; ++ks) {
#pragma unroll
    for (int pr = 0; pr < kNT / 2; ++pr) {
      std::uint32_t b0, b1, b2, b3;
      ldmatrix_x4(k_lane + S::k_offset(16 * pr, 16 * ks), b0, b1, b2, b3);
      const uint4 a = make_uint4(qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3]);
      mma_16816(s[2 * pr], a, b0, b1);
      mma_16816(s[2 * pr + 1], a, b2, b3);
    }
  }
#endif
  after_scores();
  const float* norm = meta;
  const float* scale_zero = meta + S::kScaleZeroAt;
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const float2 kn = *reinterpret_cast<const float2*>(norm + 8 * n + 2 * c);
    s[n][0] *= kn.x;
    s[n][1] *= kn.y;
    s[n][2] *= kn.x;
    s[n][3] *= kn.y;
  }
  // One branch a step around the whole mask (block-uniform; most steps skip
  // it): a test inside the loop above left a branch per n-tile in every step.
  if (mask.needed(step_tok, S::kStep, end)) {
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int t = step_tok + 8 * n + 2 * c + e;
        if (t >= end || t < mask.lo0 || t >= mask.hi0) s[n][e] = -core::kInf;
        if (t >= end || t < mask.lo1 || t >= mask.hi1) s[n][2 + e] = -core::kInf;
      }
    }
  }
  // Each row's max as two independent chains (even and odd n-tiles), joined at the end.
  float mx0 = -core::kInf, mx1 = -core::kInf, my0 = -core::kInf, my1 = -core::kInf;
#pragma unroll
  for (int n = 0; n < kNT; n += 2) {
    mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
    mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
    my0 = fmaxf(my0, fmaxf(s[n + 1][0], s[n + 1][1]));
    my1 = fmaxf(my1, fmaxf(s[n + 1][2], s[n + 1][3]));
  }
  mx0 = fmaxf(mx0, my0);
  mx1 = fmaxf(mx1, my1);
#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
  }
  const float new0 = fmaxf(w.m0, mx0), new1 = fmaxf(w.m1, mx1);
  const float ref0 = core::softmax_reference(new0), ref1 = core::softmax_reference(new1);
  const float alpha0 = fast_exp2(w.m0 - ref0), alpha1 = fast_exp2(w.m1 - ref1);
  w.m0 = new0;
  w.m1 = new1;
  float sum0 = 0.0f, sum1 = 0.0f, zs0 = 0.0f, zs1 = 0.0f;
  std::uint32_t pa[S::kStep / 16][4];  // A of O = P V per 16-token k-step
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
    const float4 sz = *reinterpret_cast<const float4*>(scale_zero + 2 * (8 * n + 2 * c));  // tokens 2c, 2c + 1
    const float sc[2] = {sz.x, sz.z};
    const float zr[2] = {sz.y, sz.w};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s[n][e] = fast_exp2(s[n][e] - ref0);
      s[n][2 + e] = fast_exp2(s[n][2 + e] - ref1);
      sum0 += s[n][e];
      sum1 += s[n][2 + e];
      zs0 += s[n][e] * zr[e];
      zs1 += s[n][2 + e] * zr[e];
    }
    // k-step n / 2: registers 0, 1 from n-tile 2kk (tokens 2c, 2c + 1), 2, 3 from 2kk + 1.
    pa[n / 2][(n % 2) * 2] = pack_half2(s[n][0] * sc[0], s[n][1] * sc[1]);
    pa[n / 2][(n % 2) * 2 + 1] = pack_half2(s[n][2] * sc[0], s[n][3] * sc[1]);
  }
  w.l0 = w.l0 * alpha0 + sum0;
  w.l1 = w.l1 * alpha1 + sum1;
  w.z0 = w.z0 * alpha0 + zs0;
  w.z1 = w.z1 * alpha1 + zs1;
  if (__any_sync(0xffffffffu, alpha0 != 1.0f || alpha1 != 1.0f)) {
#pragma unroll
    for (int n = 0; n < T::kDim / 8; ++n) {
      w.o[n][0] *= alpha0;
      w.o[n][1] *= alpha0;
      w.o[n][2] *= alpha1;
      w.o[n][3] *= alpha1;
    }
  }
#if TURBOQUANT_HAVE_WGMMA
  // The warpgroup's O (64 columns x D V^T rows), B = V^T through its descriptor.
  wgmma_fence();
  const std::uint64_t v_desc = wgmma_descriptor(v_tile, S::kVCoreStrideK, S::kCoreStrideN);
#pragma unroll
  for (int kk = 0; kk < S::kStep / 16; ++kk) {
    const std::uint64_t b = wgmma_descriptor_advance(v_desc, 2 * S::v_offset(0, 16 * kk));
    wgmma_64xNx16<T::kDim / 8>(w.o, pa[kk], b, true);
  }
  wgmma_commit();  // waited for by the next step's S product or after the loop
  if constexpr (!kWideOutputInFlight<T>) wgmma_wait_all();
#else
  // B of O: V^T rows 16 q + 8 (lane / 16) + lane % 8, tokens 16 kk + 8 ((lane / 8) % 2).
  const __half* v_lane = v_tile + S::v_offset(8 * (lane >> 4) + (lane & 7), 8 * ((lane >> 3) & 1));
#pragma unroll
  for (int kk = 0; kk < S::kStep / 16; ++kk) {
    // The A fragment: (row g, tokens 2c..) = pa[kk][0], (row g + 8) = pa[kk][1],
    // (row g, tokens 8 + 2c..) = pa[kk][2], (row g + 8, 8 + 2c..) = pa[kk][3].
    const uint4 a = make_uint4(pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]);
#pragma unroll
    for (int q = 0; q < T::kDim / 16; ++q) {
      std::uint32_t b0, b1, b2, b3;
      ldmatrix_x4(v_lane + S::v_offset(16 * q, 16 * kk), b0, b1, b2, b3);
      mma_16816(w.o[2 * q], a, b0, b1);
      mma_16816(w.o[2 * q + 1], a, b2, b3);
    }
  }
#endif
}

// Writes a warpgroup's partials of one split: the lane's two columns' O (plus
// their zero sums), max and sum, after summing the lanes' shares. o_rows:
// kWideColumns x WideSmem<T>::kOPitch floats of shared memory no other warp
// touches until the kernel ends; warp: the warp in its warpgroup.
template <class T>
__device__ __forceinline__ void wide_write_partials(const DecodeParams& p, WideRowState<T::kDim>& w, float* o_rows,
                                                    const FastColumns& cols, int split, int warp, int lane) {
  using S = WideSmem<T>;
  constexpr int D = T::kDim;
  const int g = lane >> 2, c = lane & 3;
  const int k0 = 16 * warp + g, k1 = k0 + 8;
  sum_lane_shares<1, 2>(w);  // the partials of the lane's two columns: sums over the four lanes of a row
  // Whole rows of D floats through shared memory: written straight from the
  // fragments, every 4-byte store touched 32 sectors.
  o_rows += warp * 16 * S::kOPitch;  // the warp's 16 columns
  // O's n-tile n, columns 2c and 2c + 1: V^T rows 8 n + 2c (+ 1), local value
  // dim n of lane groups 2c and 2c + 1.
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      o_rows[g * S::kOPitch + T::value_dim(2 * c + e, n)] = w.o[n][e] + w.z0;
      o_rows[(g + 8) * S::kOPitch + T::value_dim(2 * c + e, n)] = w.o[n][2 + e] + w.z1;
    }
  }
  __syncwarp();
  const core::PartialLayout pl = p.partials(D);
  const int warp_columns = min(16, cols.count - 16 * warp);
  for (int r = 0; r < warp_columns; ++r) {
    float* acc = p.partial_acc + pl.acc_offset(cols.row(16 * warp + r), split);
    const float* src = o_rows + r * S::kOPitch;
    if constexpr (D % 4 == 0) {  // acc rows are 16-byte aligned (a 256-byte aligned workspace, D floats apart)
      for (int i = lane; i < D / 4; i += 32) reinterpret_cast<float4*>(acc)[i] = reinterpret_cast<const float4*>(src)[i];
    } else {
      for (int i = lane; i < D; i += 32) acc[i] = src[i];
    }
  }
  auto write_ml = [&](int k, float m, float l) {
    if (c != 0 || k >= cols.count) return;
    float* ml = p.partial_ml + pl.ml_offset(cols.row(k), split);
    ml[0] = m;
    ml[1] = l;
  };
  write_ml(k0, w.m0, w.l0);
  write_ml(k1, w.m1, w.l1);
}

}  // namespace turboquant::cuda::detail
