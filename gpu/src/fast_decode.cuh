// Fast decode: tensor cores (mma.sync m16n8k16, fp16 operands, fp32
// accumulation), relative L2 <= 1e-3 against the golden model.
//
// One block per (split, KV head x chunk of <= 16 query heads, sequence), four
// warps. The query heads of the GQA group are the M = 16 rows of every mma, so
// each K/V byte is read once per group. Each warp streams its own 16-token tiles
// (tile i of the split goes to warp i % 4) through a 3-stage cp.async pipeline
// in shared memory and keeps its own online-softmax state; the four states are
// combined at the end into one partial per split, in the same workspace format
// as the strict kernel, and merge_kernel finishes.
//
// Dequantization happens in registers, straight into mma fragments:
//   keys   S = Q K^T with k = head_dim. Lane (token n = lane/4, c = lane%4) owns
//          the contiguous dims [c*D/4, (c+1)*D/4) of its token, i.e. one
//          contiguous byte chunk; Q is stored in shared memory with the same
//          dim permutation. Lloyd-Max codes go through a pair table in shared
//          memory (one byte / 6 bits -> two fp16 centroids, 8 copies against
//          bank conflicts); FP8 e4m3 converts exactly with cvt.f16x2.e4m3x2.
//          Scores are then multiplied by the fp16 key norm (fp32).
//   values O += P V with k = tokens. v = code * scale + zero is split as
//          (p * scale) * code + p * zero: the fp16 A operand is p * scale, the B
//          operand the exact integer code (1024 + code trick), and p * zero is
//          a per-row fp32 correction added once at the end.
#pragma once

#include "fast_plan.hpp"
#include "mma_utils.cuh"
#include "params.hpp"
#include "query_prep.cuh"

namespace turboquant::cuda::detail {

constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }
constexpr int max_int(int a, int b) { return a > b ? a : b; }

inline constexpr int kFastThreads = 128;

template <int D, int KB, int VB>
struct FastTraits {
  static constexpr int kWarps = kFastThreads / 32;
  static constexpr int kStages = 3;
  static constexpr int kRows = 16;  // mma M: query heads
  static constexpr int kTile = 16;  // tokens per tile: two mma N tiles for S, the mma K for P V
  static constexpr bool kFp8 = KB == 8;
  static constexpr int kKeyBytes = kFp8 ? D : D * KB / 8;
  static constexpr int kValueBytes = D * VB / 8;
  static constexpr int kRecordBytes = kKeyBytes + kValueBytes;  // = format.data_bytes()
  static constexpr int kRowBytes = (kRecordBytes + 15) / 16 * 16;
  static constexpr int kMetaFields = kFp8 ? 2 : 3;
  static constexpr int kStageBytes = kTile * kRowBytes + kMetaFields * 32;
  static constexpr int kCopyUnit = gcd_int(kRecordBytes, 16);
  static constexpr int kKeyChunk = kKeyBytes / 4;    // bytes per lane (D/4 dims)
  static constexpr int kValueChunk = kValueBytes / 8;  // bytes per lane (D/8 dims)
  static constexpr int kKeyWords = (kKeyChunk + 3) / 4;
  static constexpr int kValueWords = (kValueChunk + 3) / 4;
  static constexpr int kKeyAlign = gcd_int(kKeyChunk, 16);
  static constexpr int kValueAlign = gcd_int(gcd_int(kKeyBytes, kValueChunk), 16);
  static constexpr int kLutEntries = kFp8 ? 0 : 1 << (2 * KB);
  static constexpr int kLutCopies = 8;
  static constexpr int kKSteps = D / 16;
  static constexpr int kNTiles = D / 8;
  static constexpr int kLutBytes = kLutEntries * kLutCopies * 4;
  static constexpr int kQFragBytes = kKSteps * 32 * 16;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  static constexpr int kPrepBytes = 2 * kRows * D * 4;
  static constexpr int kCombineBytes = kRows * D * 4 + 2 * kWarps * kRows * 4;
  static constexpr int kWorkBytes = max_int(kPipeBytes, max_int(kPrepBytes, kCombineBytes));
  static constexpr int kSmemBytes = kLutBytes + kQFragBytes + kWorkBytes;
  static_assert(kRecordBytes % 4 == 0, "records must allow 4-byte copies");
  static_assert(D % 64 == 0, "D/4 dims per lane must hold whole 3-bit groups and whole words");
};

// B fragment of K^T for k-step ks: dims 4ks..4ks+3 of the lane's key chunk.
template <int KB, int W>
__device__ __forceinline__ void key_fragment(const std::uint32_t (&kw)[W], int ks,
                                             const std::uint32_t* lut, int lane, std::uint32_t& b0,
                                             std::uint32_t& b1) {
  if constexpr (KB == 8) {
    b0 = e4m3x2_to_half2(kw[ks] & 0xffffu);
    b1 = e4m3x2_to_half2(kw[ks] >> 16);
  } else {
    constexpr int kPairBits = 2 * KB;
    const std::uint32_t e0 = bits_at(kw, 4 * KB * ks, kPairBits);
    const std::uint32_t e1 = bits_at(kw, 4 * KB * ks + kPairBits, kPairBits);
    b0 = lut[(e0 << 3) | (lane & 7)];
    b1 = lut[(e1 << 3) | (lane & 7)];
  }
}

// B fragment of V for n-tile j: (code of token a, code of token b) at the
// lane's local dim j, as exact fp16 integers.
template <int VB, int W>
__device__ __forceinline__ std::uint32_t value_fragment(const std::uint32_t (&a)[W], const std::uint32_t (&b)[W],
                                                        int j) {
  if constexpr (VB == 4) {
    const int w = j / 8;
    const int jj = j % 8;
    const std::uint32_t y = byte_perm(a[w], b[w], jj < 4 ? 0x5410u : 0x7632u);  // [a0 a1 b0 b1] / [a2 a3 b2 b3]
    return codes_to_half2((y >> (4 * (jj % 4))) & 0x000f000fu);
  } else {
    return codes_to_half2(bits_at(a, 3 * j, 3) | (bits_at(b, 3 * j, 3) << 16));
  }
}

template <int D, int KB, int VB>
__global__ void __launch_bounds__(kFastThreads) fast_decode_kernel(DecodeParams p) {
  using T = FastTraits<D, KB, VB>;
  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint32_t* lut = reinterpret_cast<std::uint32_t*>(smem);
  uint4* qfrag = reinterpret_cast<uint4*>(smem + T::kLutBytes);
  std::uint8_t* work = smem + T::kLutBytes + T::kQFragBytes;

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const core::BlockLayout& l = p.layout;
  const int seq_len = p.seq_lens[b];
  const core::TokenRange range = fast_split_range(seq_len, p.num_splits, split);
  if (range.empty()) return;
  const int first_head = chunk * p.heads_per_block;
  const int heads = min(p.heads_per_block, p.group - first_head);
  const std::int64_t first_row = std::int64_t{b} * p.num_q_heads + kv_head * p.group + first_head;
  const std::int32_t* block_row = p.block_table + std::int64_t{b} * p.max_blocks_per_seq;

  // Pair table: entry e -> (c[e & mask], c[e >> KB]) as fp16x2, 8 interleaved copies.
  if constexpr (!T::kFp8) {
    for (int i = tid; i < T::kLutEntries * T::kLutCopies; i += kFastThreads) {
      const int e = i / T::kLutCopies;
      const int lo = e & ((1 << KB) - 1);
      const int hi = e >> KB;
      float clo = 0.0f;
      float chi = 0.0f;
#pragma unroll
      for (int k = 0; k < (1 << KB); ++k) {  // constant indices: the codebook stays in parameter space
        clo = k == lo ? p.codebook.centroids[k] : clo;
        chi = k == hi ? p.codebook.centroids[k] : chi;
      }
      lut[i] = pack_half2(clo, chi);
    }
  }
  // Queries: prepared in fp32 exactly as the golden model, then fp16 fragments
  // in the permuted dim order of the key chunks.
  {
    float* qf = reinterpret_cast<float*>(work);
    prepare_queries<D>(p, first_row, heads, qf, qf + T::kRows * D);
    for (int i = heads * D + tid; i < T::kRows * D; i += kFastThreads) qf[i] = 0.0f;
    __syncthreads();
    for (int i = tid; i < T::kKSteps * 32; i += kFastThreads) {
      const int ks = i / 32;
      const int ln = i % 32;
      const int dim = (ln & 3) * (D / 4) + 4 * ks;
      const float* r0 = qf + (ln >> 2) * D + dim;
      const float* r1 = r0 + 8 * D;
      qfrag[i] = make_uint4(pack_half2(r0[0], r0[1]), pack_half2(r1[0], r1[1]), pack_half2(r0[2], r0[3]),
                            pack_half2(r1[2], r1[3]));
    }
    __syncthreads();
  }

  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int gq = lane >> 2;  // fragment row group: query head gq (and gq + 8); key token gq (and gq + 8)
  const int c = lane & 3;    // quad position
  const int num_tiles = (range.size() + T::kTile - 1) / T::kTile;
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + T::kWarps - 1) / T::kWarps : 0;
  std::uint8_t* stages = work + warp * T::kStages * T::kStageBytes;

  auto issue = [&](int it) {
    const int tok0 = range.begin + (warp + T::kWarps * it) * T::kTile;
    const std::uint8_t* block = p.cache + l.block_base(block_row[tok0 / l.block_size]);
    const int slot0 = tok0 % l.block_size;
    std::uint8_t* dst = stages + (it % T::kStages) * T::kStageBytes;
    constexpr int kUnits = T::kRecordBytes / T::kCopyUnit;
#pragma unroll 4
    for (int u = lane; u < T::kTile * kUnits; u += 32) {
      const int r = u / kUnits;
      const int k = u % kUnits;
      cp_async<T::kCopyUnit>(dst + r * T::kRowBytes + k * T::kCopyUnit,
                             block + l.key_data_offset(slot0 + r, kv_head) + k * T::kCopyUnit);
    }
    if (lane < 2 * T::kMetaFields) {
      const int fi = lane / 2;
      const auto field = static_cast<core::MetaField>(T::kFp8 ? fi + 1 : fi);
      cp_async<16>(dst + T::kTile * T::kRowBytes + fi * 32 + (lane % 2) * 16,
                   block + l.meta_field_offset(slot0, kv_head, field) + (lane % 2) * 16);
    }
  };

  float o[T::kNTiles][4];
#pragma unroll
  for (int j = 0; j < T::kNTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -core::kInf, m1 = -core::kInf;  // rows gq, gq + 8
  float l0 = 0.0f, l1 = 0.0f;                // this lane's share of the row sums
  float z0 = 0.0f, z1 = 0.0f;                // this lane's share of sum p * zero

#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < my_tiles) issue(s);
    cp_async_commit();
  }
  for (int it = 0; it < my_tiles; ++it) {
    cp_async_wait<T::kStages - 2>();
    __syncwarp();
    if (it + T::kStages - 1 < my_tiles) issue(it + T::kStages - 1);
    cp_async_commit();

    const std::uint8_t* st = stages + (it % T::kStages) * T::kStageBytes;
    const std::uint32_t* meta = reinterpret_cast<const std::uint32_t*>(st + T::kTile * T::kRowBytes);
    const int valid = min(T::kTile, range.end - (range.begin + (warp + T::kWarps * it) * T::kTile));

    // S = Q K^T for tokens gq (n-tile 0) and gq + 8 (n-tile 1).
    std::uint32_t kw[2][T::kKeyWords];
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + gq * T::kRowBytes + c * T::kKeyChunk, kw[0]);
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + (gq + 8) * T::kRowBytes + c * T::kKeyChunk, kw[1]);
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < T::kKSteps; ++ks) {
      const uint4 a = qfrag[ks * 32 + lane];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        std::uint32_t b0, b1;
        key_fragment<KB>(kw[nt], ks, lut, lane, b0, b1);
        mma_16816(s[nt], a, b0, b1);
      }
    }
    // This lane's S columns are tokens 2c, 2c+1 (n-tile 0) and 8+2c, 9+2c (n-tile 1).
    float2 vscale[2], vzero[2];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int tok = nt * 8 + 2 * c;
      if constexpr (!T::kFp8) {
        const float2 nrm = unpack_half2(meta[tok / 2]);
        s[nt][0] *= nrm.x;
        s[nt][1] *= nrm.y;
        s[nt][2] *= nrm.x;
        s[nt][3] *= nrm.y;
      }
      constexpr int kScaleField = T::kFp8 ? 0 : 1;
      vscale[nt] = unpack_half2(meta[kScaleField * 8 + tok / 2]);
      vzero[nt] = unpack_half2(meta[(kScaleField + 1) * 8 + tok / 2]);
      if (tok >= valid) {
        s[nt][0] = s[nt][2] = -core::kInf;
        vscale[nt].x = vzero[nt].x = 0.0f;
      }
      if (tok + 1 >= valid) {
        s[nt][1] = s[nt][3] = -core::kInf;
        vscale[nt].y = vzero[nt].y = 0.0f;
      }
    }
    // Online softmax (base 2) for rows gq and gq + 8; the row max spans the quad.
    float mx0 = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
    float mx1 = fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3]));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float new0 = fmaxf(m0, mx0);
    const float new1 = fmaxf(m1, mx1);
    const float ref0 = new0 == -core::kInf ? 0.0f : new0;
    const float ref1 = new1 == -core::kInf ? 0.0f : new1;
    const float alpha0 = fast_exp2(m0 - ref0);
    const float alpha1 = fast_exp2(m1 - ref1);
    m0 = new0;
    m1 = new1;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      s[nt][0] = fast_exp2(s[nt][0] - ref0);
      s[nt][1] = fast_exp2(s[nt][1] - ref0);
      s[nt][2] = fast_exp2(s[nt][2] - ref1);
      s[nt][3] = fast_exp2(s[nt][3] - ref1);
    }
    l0 = l0 * alpha0 + ((s[0][0] + s[0][1]) + (s[1][0] + s[1][1]));
    l1 = l1 * alpha1 + ((s[0][2] + s[0][3]) + (s[1][2] + s[1][3]));
    z0 = z0 * alpha0 + ((s[0][0] * vzero[0].x + s[0][1] * vzero[0].y) + (s[1][0] * vzero[1].x + s[1][1] * vzero[1].y));
    z1 = z1 * alpha1 + ((s[0][2] * vzero[0].x + s[0][3] * vzero[0].y) + (s[1][2] * vzero[1].x + s[1][3] * vzero[1].y));
    if (__any_sync(0xffffffffu, alpha0 != 1.0f || alpha1 != 1.0f)) {
#pragma unroll
      for (int j = 0; j < T::kNTiles; ++j) {
        o[j][0] *= alpha0;
        o[j][1] *= alpha0;
        o[j][2] *= alpha1;
        o[j][3] *= alpha1;
      }
    }
    // O += (P * scale) V_codes. A rows: heads gq / gq+8; k: tokens 2c, 2c+1 | 8+2c, 9+2c.
    const uint4 pa = make_uint4(pack_half2(s[0][0] * vscale[0].x, s[0][1] * vscale[0].y),
                                pack_half2(s[0][2] * vscale[0].x, s[0][3] * vscale[0].y),
                                pack_half2(s[1][0] * vscale[1].x, s[1][1] * vscale[1].y),
                                pack_half2(s[1][2] * vscale[1].x, s[1][3] * vscale[1].y));
    std::uint32_t vw[4][T::kValueWords];
    const std::uint8_t* vbase = st + T::kKeyBytes + gq * T::kValueChunk;
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c) * T::kRowBytes, vw[0]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 1) * T::kRowBytes, vw[1]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 8) * T::kRowBytes, vw[2]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 9) * T::kRowBytes, vw[3]);
#pragma unroll
    for (int j = 0; j < T::kNTiles; ++j) {
      mma_16816(o[j], pa, value_fragment<VB>(vw[0], vw[1], j), value_fragment<VB>(vw[2], vw[3], j));
    }
  }
  cp_async_wait<0>();

  // Combine the four warps' states into this split's partial.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  z0 += __shfl_xor_sync(0xffffffffu, z0, 1);
  z0 += __shfl_xor_sync(0xffffffffu, z0, 2);
  z1 += __shfl_xor_sync(0xffffffffu, z1, 1);
  z1 += __shfl_xor_sync(0xffffffffu, z1, 2);
  __syncthreads();  // every warp is done with its pipeline stages
  float* buf = reinterpret_cast<float*>(work);  // [16][D]
  float* wmax = buf + T::kRows * D;              // [warps][16]
  float* wsum = wmax + T::kWarps * T::kRows;     // [warps][16]
  if (c == 0) {
    wmax[warp * T::kRows + gq] = m0;
    wmax[warp * T::kRows + gq + 8] = m1;
    wsum[warp * T::kRows + gq] = l0;
    wsum[warp * T::kRows + gq + 8] = l1;
  }
  __syncthreads();
  float big0 = -core::kInf, big1 = -core::kInf;
#pragma unroll
  for (int w = 0; w < T::kWarps; ++w) {
    big0 = fmaxf(big0, wmax[w * T::kRows + gq]);
    big1 = fmaxf(big1, wmax[w * T::kRows + gq + 8]);
  }
  const float f0 = m0 == -core::kInf ? 0.0f : fast_exp2(m0 - big0);
  const float f1 = m1 == -core::kInf ? 0.0f : fast_exp2(m1 - big1);
#pragma unroll
  for (int w = 0; w < T::kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < T::kNTiles; ++j) {
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int d = (2 * c + cc) * (D / 8) + j;
          float* r0 = buf + gq * D + d;
          float* r1 = buf + (gq + 8) * D + d;
          *r0 = (w == 0 ? 0.0f : *r0) + f0 * (o[j][cc] + z0);
          *r1 = (w == 0 ? 0.0f : *r1) + f1 * (o[j][2 + cc] + z1);
        }
      }
    }
    __syncthreads();
  }
  const std::int64_t first_partial = first_row * p.num_splits + split;
  for (int i = tid; i < heads * D; i += kFastThreads) {
    const int r = i / D;
    p.partial_acc[(first_partial + std::int64_t{r} * p.num_splits) * D + i % D] = buf[i];
  }
  if (tid < heads) {
    float big = -core::kInf;
    for (int w = 0; w < T::kWarps; ++w) big = fmaxf(big, wmax[w * T::kRows + tid]);
    float sum = 0.0f;
    for (int w = 0; w < T::kWarps; ++w) {
      const float m = wmax[w * T::kRows + tid];
      sum += m == -core::kInf ? 0.0f : fast_exp2(m - big) * wsum[w * T::kRows + tid];
    }
    float* ml = p.partial_ml + (first_partial + std::int64_t{tid} * p.num_splits) * 2;
    ml[0] = big;
    ml[1] = sum;
  }
}

}  // namespace turboquant::cuda::detail
