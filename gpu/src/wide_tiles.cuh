// The wide kernel's shared-memory tiles (wide_decode.cuh): the layout of a
// step's dequantized K [token][dim] and V^T [dim][token] fp16 tiles and their
// metadata, and the warp's dequantizing store of its staged 16-token tile.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "fast_mainloop.cuh"
#include "fast_stage.cuh"

namespace turboquant::cuda::detail {

inline constexpr int kWideWarps = 4;
inline constexpr int kWideColumns = 16 * kWideWarps;  // mma M per warp

// K column of a key fragment register: k-step ks, register half p (0: local
// dims 4 ks, 4 ks + 1 of lane c; 1: 4 ks + 2, 4 ks + 3), the first of its two.
__host__ __device__ constexpr int wide_key_column(int c, int ks, int p) { return 16 * ks + 8 * p + 2 * c; }
// V^T row of local value dim j of lane group g.
__host__ __device__ constexpr int wide_value_row(int g, int j) { return 8 * j + g; }

// Both maps, and T's lane dims, are bijections onto [0, D): every K column and
// V^T row holds exactly one dim, every dim has one place.
template <class T>
constexpr bool wide_maps_are_bijections() {
  constexpr int D = T::kDim;
  int key_col[D] = {}, key_dim[D] = {}, value_row[D] = {}, value_dim[D] = {};
  for (int c = 0; c < 4; ++c) {
    for (int ks = 0; ks < T::kKSteps; ++ks) {
      for (int q = 0; q < 4; ++q) {  // local dim 4 ks + q: K column wide_key_column(c, ks, q / 2) + q % 2
        ++key_col[wide_key_column(c, ks, q / 2) + q % 2];
        ++key_dim[T::key_dim(c, 4 * ks + q)];
      }
    }
  }
  for (int g = 0; g < 8; ++g) {
    for (int j = 0; j < D / 8; ++j) {
      ++value_row[wide_value_row(g, j)];
      ++value_dim[T::value_dim(g, j)];
    }
  }
  for (int d = 0; d < D; ++d) {
    if (key_col[d] != 1 || key_dim[d] != 1 || value_row[d] != 1 || value_dim[d] != 1) return false;
  }
  return true;
}

// Shared memory of a wide block: the warps' pipeline stages, the step's K
// [64 tokens][D] and one or two V^T [D][64 tokens] fp16 tiles (kValueBuffers),
// the step's per-token key norm, value scale and zero, the pair table, and
// with tensor copies the stage barriers. The prepared query
// (kWideColumns x D floats) lives in the tile region before the loop, the
// block's O (kWideColumns x kOPitch floats) after it.
//
// Both tiles are the B operands of the step's two products (K: n = token,
// k = K column; V^T: n = V^T row, k = token), stored as wgmma's canonical
// K-major layout without swizzle: core matrices of 8 n x 8 k halfs, 128
// contiguous bytes (n-th 16-byte row: k 0..7), n-adjacent core matrices 128
// bytes apart, k-adjacent ones a whole column of core matrices apart
// (kKCoreStrideK, kVCoreStrideK). wgmma reads them through a descriptor
// (wgmma.cuh); ldmatrix's and stmatrix's eight 16-byte rows are one core
// matrix (no bank conflict).
//
// Neither tile is in dim order. K's columns are in the order of the lanes'
// fragments (wide_key_column), so that one fragment register of the warp is
// one core matrix (four of them a stmatrix); the query's A fragments follow
// it. V^T's rows are the lanes' local value dims, row 8 j + g for local dim
// j of lane group g (wide_value_row), so that the eight lane groups store to
// eight consecutive rows; the O fragments' columns are these rows, and the
// epilogue writes them to their dims.
template <class T>
struct WideSmem {
  static constexpr int D = T::kDim;
  static constexpr int kStep = kWideWarps * T::kTile;  // tokens per step
  static constexpr int kCoreHalfs = 64;                // 8 x 8 halfs
  static constexpr int kKCoreStrideK = kStep / 8 * 128;  // bytes between k-adjacent core matrices of K
  static constexpr int kVCoreStrideK = D / 8 * 128;      // ... of V^T
  static constexpr int kCoreStrideN = 128;
  // Half offsets of K (token t, K column k) and V^T (row n, token t).
  __host__ __device__ static constexpr int k_offset(int t, int k) {
    return (t / 8 + k / 8 * (kStep / 8)) * kCoreHalfs + t % 8 * 8 + k % 8;
  }
  __host__ __device__ static constexpr int v_offset(int n, int t) {
    return (n / 8 + t / 8 * (D / 8)) * kCoreHalfs + n % 8 * 8 + t % 8;
  }
  // The step's metadata, 3 kStep floats: the key norms by token, then (value
  // scale, value zero) pairs by token, so that a lane reads both of two tokens
  // in one 16-byte load.
  static constexpr int kScaleZeroAt = kStep;  // float offset of the pairs
  static constexpr int kMetaBytes = (kScaleZeroAt + 2 * kStep) * 4;
  static constexpr int kTileBytes = kStep * D * 2;
  static constexpr int kOPitch = D + 4;  // floats per row of the epilogue's O (in the tile region)
  static constexpr int kPipeBytes = T::kPipeBytes;
  static constexpr int kKOffset = (kPipeBytes + 127) / 128 * 128;
  static constexpr int kVOffset = kKOffset + kTileBytes;
  // The bytes of a block with `buffers` V^T tiles.
  // Tensor copies (T::kTensorCopy): the warps' stage barriers after the pair
  // table, and the launch's slack for rounding the start up to 128 bytes.
  static constexpr int kBarBytes = T::kTensorCopy ? kWideWarps * T::kStages * 8 : 0;
  static constexpr int kAlignSlack = T::kWorkAlign - 16;
  static constexpr int bytes_with(int buffers) {
    const int region = (1 + buffers) * kTileBytes > kWideColumns * kOPitch * 4 ? (1 + buffers) * kTileBytes
                                                                                : kWideColumns * kOPitch * 4;
    return kKOffset + (region + 127) / 128 * 128 + kMetaBytes + T::kLutBytes + kBarBytes + kAlignSlack;
  }
  // Two V^T tiles where two blocks still fit an SM (kBlockBudget), so that a
  // step's O product reads one while the next step's tile is written to the
  // other (wide_decode_kernel); one where they would not (AoS 4-bit: its
  // larger stages).
  static constexpr int kBlockBudget = 227 * 1024 / 2 - 1024 - 128;  // two blocks, their reserved 1 KB and static 64 B
  static constexpr int kValueBuffers = bytes_with(2) <= kBlockBudget ? 2 : 1;
  static constexpr int kRegionBytes =
      bytes_with(kValueBuffers) - kKOffset - kMetaBytes - T::kLutBytes - kBarBytes - kAlignSlack;
  static constexpr int kMetaOffset = kKOffset + kRegionBytes;
  static constexpr int kLutOffset = kMetaOffset + kMetaBytes;
  static constexpr int kBarOffset = kLutOffset + T::kLutBytes;
  static constexpr int kBytes = kBarOffset + kBarBytes;       // from the (aligned) start
  static constexpr int kLaunchBytes = kBytes + kAlignSlack;  // dynamic shared memory of a launch
  static_assert(kWideColumns * D * 4 <= kMetaOffset - kKOffset, "the prepared query fits the tile region");
  static_assert(kMetaOffset % 16 == 0, "16-byte loads of the (scale, zero) pairs");
  static_assert(kBarOffset % 8 == 0, "8-byte barriers");
  static_assert(T::kWarps == kWideWarps, "four warps");
  static_assert(wide_maps_are_bijections<T>(), "K columns and V^T rows hold every dim once");
  static_assert(D <= 128, "the O fragments of D 256 would take 128 registers");
  static_assert(D % 16 == 0 && kStep % 16 == 0, "whole k-steps of both products");
};

// Dequantizes the warp's staged tile (tokens tok0 .. tok0 + 15 of the step's
// rows r0 .. r0 + 15) into K, V^T and the step's metadata; tokens past `valid`
// or before `union_begin` weigh nothing (norm, scale, zero 0).
template <class T, class Stage>
__device__ __forceinline__ void wide_dequantize(const Stage& stage, const std::uint8_t* st, const std::uint8_t* lut,
                                                std::uint32_t lut_lane_off, int tok0, int valid, int union_begin,
                                                int r0, __half* k_tile, __half* v_tile, float* meta, int g, int c) {
  using S = WideSmem<T>;
  std::uint32_t kw[2][T::kKeyWords];
  stage.load_keys(st, kw);
  float sq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 squares;
  // A k-step's four fragment registers are four core matrices of K, stored
  // by one stmatrix: lane l gives row l % 8 of matrix l / 8, whose tokens
  // are r0 + 8 (l / 16) + l % 8 and columns 16 ks + 8 ((l / 8) % 2) + 0..7
  // (wide_key_column's p = (l / 8) % 2; the register order below).
  const int lane = 4 * g + c;
  __half* const k_row = k_tile + S::k_offset(r0 + 8 * (lane >> 4) + (lane & 7), 8 * ((lane >> 3) & 1));
#pragma unroll
  for (int ks = 0; ks < T::kKSteps; ++ks) {
    uint4 a;
    key_fragment<T::kKeyBits, T::kLutShift, T::kFp8Format>(kw[0], ks, lut, lut_lane_off, a.x, a.z);
    key_fragment<T::kKeyBits, T::kLutShift, T::kFp8Format>(kw[1], ks, lut, lut_lane_off, a.y, a.w);
    static_assert(wide_key_column(0, 1, 0) == 16 && wide_key_column(0, 0, 1) == 8, "k-steps of 16, halves of 8");
    // Rows g and g + 8 of columns 16 ks + 2c (a.x, a.y) and 16 ks + 8 + 2c (a.z, a.w).
    stmatrix_x4(k_row + S::k_offset(0, 16 * ks), a.x, a.z, a.y, a.w);
    if constexpr (T::kNormFromSquares) add_squares<T>(sq, squares, a, ks);
  }
  float scale0, scale1, zero0, zero1;
  stage.value_meta(st, scale0, scale1, zero0, zero1);
  float n0 = 1.0f, n1 = 1.0f;
  if constexpr (!T::kFp8) stage.key_norms(st, sq, n0, n1);
  if (g >= valid || tok0 + g < union_begin) n0 = scale0 = zero0 = 0.0f;
  if (g + 8 >= valid || tok0 + g + 8 < union_begin) n1 = scale1 = zero1 = 0.0f;
  if (c == 0) {
    float2* scale_zero = reinterpret_cast<float2*>(meta + S::kScaleZeroAt);
    meta[r0 + g] = n0;
    meta[r0 + g + 8] = n1;
    scale_zero[r0 + g] = make_float2(scale0, zero0);
    scale_zero[r0 + g + 8] = make_float2(scale1, zero1);
  }
  // V^T: the value fragment (local dim j of lane group g; tokens 2c, 2c + 1 or
  // 2c + 8, 2c + 9) is one word of row wide_value_row(g, j), as the codes
  // themselves (their power of two undone in the conversion's one fma).
  std::uint32_t vw[4][T::kValueWords];
  stage.load_values(st, vw);
  // Local dims j and j + 1 are four core matrices of V^T (rows 8 j + 0..7 and
  // 8 (j + 1) + 0..7, tokens r0 + 0..7 and r0 + 8..15), one stmatrix: lane l
  // gives V^T row 8 (j + l / 16) + l % 8 of tokens r0 + 8 ((l / 8) % 2).
  static_assert(wide_value_row(0, 1) == 8 && (2 * T::kMTiles) % 2 == 0, "V^T rows of lane group g: 8 j + g");
  __half* const v_row = v_tile + S::v_offset(8 * (lane >> 4) + (lane & 7), r0 + 8 * ((lane >> 3) & 1));
#pragma unroll
  for (int j = 0; j < 2 * T::kMTiles; j += 2) {
    stmatrix_x4(v_row + S::v_offset(8 * j, 0), value_fragment<T::kValueBits, true>(vw[0], vw[1], j),
                value_fragment<T::kValueBits, true>(vw[2], vw[3], j),
                value_fragment<T::kValueBits, true>(vw[0], vw[1], j + 1),
                value_fragment<T::kValueBits, true>(vw[2], vw[3], j + 1));
  }
}

// A warp without a tile in this step: its tokens weigh nothing, and its V^T
// columns must hold finite numbers (p = 0 times them).
template <class T>
__device__ __forceinline__ void wide_clear(int r0, __half* v_tile, float* meta, int lane) {
  using S = WideSmem<T>;
  if (lane < T::kTile) {
    meta[r0 + lane] = 0.0f;
    reinterpret_cast<float2*>(meta + S::kScaleZeroAt)[r0 + lane] = make_float2(0.0f, 0.0f);
  }
  for (int i = lane; i < T::kDim * (T::kTile / 2); i += 32) {
    const int row = i / (T::kTile / 2);
    const int pair = i % (T::kTile / 2);
    *reinterpret_cast<std::uint32_t*>(v_tile + S::v_offset(row, r0 + 2 * pair)) = 0u;
  }
}

}  // namespace turboquant::cuda::detail
