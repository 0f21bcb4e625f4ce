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
//          memory (one byte / 6 bits -> two fp16 centroids, 16 or 32 interleaved
//          copies against bank conflicts); FP8 e4m3 converts exactly with
//          cvt.f16x2.e4m3x2. Scores are then multiplied by the fp16 key norm.
//   values O += P V with k = tokens. v = code * scale + zero is split as
//          (p * scale) * code + p * zero: the fp16 A operand is p * scale, the B
//          operand the exact integer code (times a power of two, undone at the
//          end), and p * zero is a per-row fp32 term added once at the end.
// The host picks the number of splits (fast_plan.hpp) for about one wave of
// blocks; ncu and the per-step history are in docs/PERFORMANCE.md.
#pragma once

#include "fast_plan.hpp"
#include "mma_utils.cuh"
#include "params.hpp"
#include "query_prep.cuh"

namespace turboquant::cuda::detail {

constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }
constexpr int max_int(int a, int b) { return a > b ? a : b; }
constexpr int log2_int(int a) { return a <= 1 ? 0 : 1 + log2_int(a / 2); }
// Smallest multiple of 16 >= bytes whose row stride puts the value chunks of
// tokens 2c (c = 0..3) in different bank octets (stride mod 64 is 16 or 48).
constexpr int padded_row_bytes(int bytes) {
  int r = (bytes + 15) / 16 * 16;
  while (r % 64 != 16 && r % 64 != 48) r += 16;
  return r;
}

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
  static constexpr int kRowBytes = padded_row_bytes(kRecordBytes);
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
  // Copies of the pair table, interleaved (entry e, copy k at word e * copies + k):
  // lane l reads copy l % copies, so lanes only collide when they share a copy.
  static constexpr int kLutCopies = KB == 3 ? 32 : 16;
  static constexpr int kLutShift = log2_int(4 * kLutCopies);  // byte offset of entry e = e << kLutShift
  static constexpr int kKSteps = D / 16;
  static constexpr int kNTiles = D / 8;
  static constexpr int kLutBytes = kLutEntries * kLutCopies * 4;
  static constexpr int kQFragBytes = kKSteps * 32 * 16;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  static constexpr int kPrepBytes = 2 * kRows * D * 4;
  // The final combine: each warp's accumulator fragments as float4 per (n-tile, lane).
  // It reuses the whole dynamic region (work, table and Q fragments are dead by then).
  static constexpr int kCombineBytes = kWarps * kNTiles * 32 * 16;
  static constexpr int kWorkBytes =
      max_int(kPipeBytes, max_int(kPrepBytes, kCombineBytes - kLutBytes - kQFragBytes));
  static constexpr int kSmemBytes = kWorkBytes + kLutBytes + kQFragBytes;
  static_assert(kRecordBytes % 4 == 0, "records must allow 4-byte copies");
  static_assert(D % 64 == 0, "D/4 dims per lane must hold whole 3-bit groups and whole words");
};

// B fragment of K^T for k-step ks: dims 4ks..4ks+3 of the lane's key chunk.
// Lloyd-Max codes: two pair-table lookups; the byte offset of an entry is its
// index << kShift (copies of 4 bytes), so one shift and one and-or form the address.
template <int KB, int kShift, int W>
__device__ __forceinline__ void key_fragment(const std::uint32_t (&kw)[W], int ks, const std::uint8_t* lut_lane,
                                             std::uint32_t lane_off, std::uint32_t& b0, std::uint32_t& b1) {
  if constexpr (KB == 8) {
    b0 = e4m3x2_to_half2(kw[ks] & 0xffffu);
    b1 = e4m3x2_to_half2(kw[ks] >> 16);
  } else {
    constexpr int kPairBits = 2 * KB;
    constexpr std::uint32_t kMask = ((1u << kPairBits) - 1u) << kShift;
    const int p0 = 4 * KB * ks;
    const int p1 = p0 + kPairBits;
    const std::uint32_t o0 = and_or(shifted_bits(kw, p0, kShift), kMask, lane_off);
    const std::uint32_t o1 = and_or(shifted_bits(kw, p1, kShift), kMask, lane_off);
    b0 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o0);
    b1 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o1);
  }
}

// B fragment of V for n-tile j: (code of token a, code of token b) at the
// lane's local dim j, as exact fp16 values code * value_frag_scale<VB>(j).
template <int VB, int W>
__device__ __forceinline__ std::uint32_t value_fragment(const std::uint32_t (&a)[W], const std::uint32_t (&b)[W],
                                                        int j) {
  if constexpr (VB == 4) {
    // Byte k of word w holds dims 8w+2k (low nibble) and 8w+2k+1 (high nibble).
    const int w = j / 8;
    const int k = (j % 8) / 2;
    const std::uint32_t sel = k | (k << 4) | ((4 + k) << 8) | ((4 + k) << 12);  // [a_k a_k b_k b_k]
    const std::uint32_t y = byte_perm(a[w], b[w], sel);
    return masked_codes_to_half2(y, (j % 2) ? 0x00f000f0u : 0x000f000fu);
  } else {
    // 16-bit windows at bit 9i hold fields 3i, 3i+1, 3i+2 at offsets 0, 3, 6.
    const int i = j / 3;
    const std::uint32_t wa = shifted_bits(a, 9 * i, 0);
    const std::uint32_t wb = shifted_bits(b, 9 * i, 0);
    const std::uint32_t y = byte_perm(wa, wb, 0x5410u);
    return masked_codes_to_half2(y, 0x00070007u << (3 * (j % 3)));
  }
}

template <int VB>
__host__ __device__ constexpr float value_frag_scale(int j) {
  return VB == 4 ? ((j % 2) ? 16.0f : 1.0f) : (j % 3 == 0 ? 1.0f : (j % 3 == 1 ? 8.0f : 64.0f));
}

template <int D, int KB, int VB>
__global__ void __launch_bounds__(kFastThreads, D <= 128 ? 4 : 2) fast_decode_kernel(DecodeParams p) {
  using T = FastTraits<D, KB, VB>;
  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint8_t* work = smem;
  std::uint8_t* lut = smem + T::kWorkBytes;
  uint4* qfrag = reinterpret_cast<uint4*>(smem + T::kWorkBytes + T::kLutBytes);
  __shared__ std::uint32_t centroid_half[16];
  __shared__ float warp_max[T::kWarps][T::kRows];
  __shared__ float warp_sum[T::kWarps][T::kRows];

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const core::BlockLayout& l = p.layout;
  const int seq_len = p.seq_lens[b];
  const core::TokenRange range = fast_split_range(seq_len, p.plan_splits, split);
  if (range.empty()) return;
  const int first_head = chunk * p.heads_per_block;
  const int heads = min(p.heads_per_block, p.group - first_head);
  const std::int64_t first_row = std::int64_t{b} * p.num_q_heads + kv_head * p.group + first_head;
  const std::int32_t* block_row = p.block_table + std::int64_t{b} * p.max_blocks_per_seq;

  // Pair table: entry e -> (c[e & mask], c[e >> KB]) as fp16x2, 8 interleaved copies.
  if constexpr (!T::kFp8) {
    if (tid < (1 << KB)) {
      float c = 0.0f;
#pragma unroll
      for (int k = 0; k < (1 << KB); ++k) c = k == tid ? p.codebook.centroids[k] : c;
      centroid_half[tid] = pack_half2(c, 0.0f);
    }
    __syncthreads();
    std::uint32_t* lut32 = reinterpret_cast<std::uint32_t*>(lut);
    for (int i = tid; i < T::kLutEntries * T::kLutCopies; i += kFastThreads) {
      const int e = i / T::kLutCopies;
      lut32[i] = centroid_half[e & ((1 << KB) - 1)] | (centroid_half[e >> KB] << 16);
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
  const std::uint32_t lut_lane_off = (lane % T::kLutCopies) * 4;
  const int num_tiles = (range.size() + T::kTile - 1) / T::kTile;
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + T::kWarps - 1) / T::kWarps : 0;
  std::uint8_t* const stages = work + warp * T::kStages * T::kStageBytes;

  // Copy cursor: the next tile this warp issues, as (page, slot), and its block id.
  constexpr int kWarpStep = T::kWarps * T::kTile;  // tokens between a warp's tiles
  const std::int64_t head_offset = std::int64_t{kv_head} * T::kRecordBytes;
  const int record_stride = l.num_kv_heads * T::kRecordBytes;  // between slots of one head
  int issue_page = 0, issue_slot = 0, issue_block = 0;
  if (my_tiles > 0) {
    const int tok = range.begin + warp * T::kTile;
    issue_page = tok / l.block_size;
    issue_slot = tok % l.block_size;
    issue_block = block_row[issue_page];
  }
  int issued = 0;
  std::int32_t meta_base[T::kMetaFields];
#pragma unroll
  for (int f = 0; f < T::kMetaFields; ++f) {
    meta_base[f] = static_cast<std::int32_t>(
        l.meta_field_offset(0, kv_head, static_cast<core::MetaField>(T::kFp8 ? f + 1 : f)));
  }
  auto issue = [&](std::uint8_t* dst) {
    const std::uint8_t* block = p.cache + l.block_base(issue_block);
    const std::uint8_t* src = block + head_offset + std::int64_t{issue_slot} * record_stride;
    constexpr int kUnits = T::kRecordBytes / T::kCopyUnit;
    if constexpr (32 % kUnits == 0) {
      constexpr int kRowStep = 32 / kUnits;
      const int r0 = lane / kUnits;
      const int ch = (lane % kUnits) * T::kCopyUnit;
#pragma unroll
      for (int r = r0; r < T::kTile; r += kRowStep) {
        cp_async<T::kCopyUnit>(dst + r * T::kRowBytes + ch, src + r * record_stride + ch);
      }
    } else {
#pragma unroll
      for (int u = lane; u < T::kTile * kUnits; u += 32) {
        const int r = u / kUnits;
        const int ch = (u % kUnits) * T::kCopyUnit;
        cp_async<T::kCopyUnit>(dst + r * T::kRowBytes + ch, src + r * record_stride + ch);
      }
    }
    if (lane < 2 * T::kMetaFields) {
      const int half = (lane % 2) * 16;
      cp_async<16>(dst + T::kTile * T::kRowBytes + (lane / 2) * 32 + half,
                   block + meta_base[lane / 2] + 2 * issue_slot + half);
    }
    ++issued;
    issue_slot += kWarpStep;
    while (issue_slot >= l.block_size) {
      issue_slot -= l.block_size;
      ++issue_page;
    }
    if (issued < my_tiles) issue_block = block_row[issue_page];  // used one iteration later
  };

  float o[T::kNTiles][4];
#pragma unroll
  for (int j = 0; j < T::kNTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -core::kInf, m1 = -core::kInf;  // rows gq, gq + 8
  float l0 = 0.0f, l1 = 0.0f;                // this lane's share of the row sums
  float z0 = 0.0f, z1 = 0.0f;                // this lane's share of sum p * zero

  std::uint8_t* issue_stage = stages;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < my_tiles) issue(issue_stage);
    cp_async_commit();
    issue_stage += T::kStageBytes;
  }
  const std::uint8_t* st = stages;
  int tok0 = range.begin + warp * T::kTile;
  for (int it = 0; it < my_tiles; ++it) {
    cp_async_wait<T::kStages - 2>();
    __syncwarp();
    if (it + T::kStages - 1 < my_tiles) issue(issue_stage);
    cp_async_commit();
    issue_stage = issue_stage == stages + (T::kStages - 1) * T::kStageBytes ? stages : issue_stage + T::kStageBytes;

    const std::uint32_t* meta = reinterpret_cast<const std::uint32_t*>(st + T::kTile * T::kRowBytes);
    const int valid = min(T::kTile, range.end - tok0);

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
        key_fragment<KB, T::kLutShift>(kw[nt], ks, lut, lut_lane_off, b0, b1);
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
    }
    if (valid < T::kTile) {  // the split's last tile: tokens past its end weigh nothing
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int tok = nt * 8 + 2 * c;
        if (tok >= valid) {
          s[nt][0] = s[nt][2] = -core::kInf;
          vscale[nt].x = vzero[nt].x = 0.0f;
        }
        if (tok + 1 >= valid) {
          s[nt][1] = s[nt][3] = -core::kInf;
          vscale[nt].y = vzero[nt].y = 0.0f;
        }
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
    st = st == stages + (T::kStages - 1) * T::kStageBytes ? stages : st + T::kStageBytes;
    tok0 += kWarpStep;
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
  if (c == 0) {
    warp_max[warp][gq] = m0;
    warp_max[warp][gq + 8] = m1;
    warp_sum[warp][gq] = l0;
    warp_sum[warp][gq + 8] = l1;
  }
  __syncthreads();  // every warp is done with its pipeline stages and has posted its max
  pdl_launch_dependents();  // the merge grid may start launching (it waits for this grid)
  float big0 = -core::kInf, big1 = -core::kInf;
#pragma unroll
  for (int w = 0; w < T::kWarps; ++w) {
    big0 = fmaxf(big0, warp_max[w][gq]);
    big1 = fmaxf(big1, warp_max[w][gq + 8]);
  }
  const float f0 = m0 == -core::kInf ? 0.0f : fast_exp2(m0 - big0);
  const float f1 = m1 == -core::kInf ? 0.0f : fast_exp2(m1 - big1);
  // Each warp stores its rescaled fragments (value scale 2^k undone, zero-point
  // term added) as one float4 per (n-tile, lane): conflict-free, no serialization.
  float4* frag = reinterpret_cast<float4*>(smem);  // [warps][n-tiles][32]
#pragma unroll
  for (int j = 0; j < T::kNTiles; ++j) {
    const float inv = 1.0f / value_frag_scale<VB>(j);  // exact: a power of two
    frag[(warp * T::kNTiles + j) * 32 + lane] =
        make_float4(f0 * (o[j][0] * inv + z0), f0 * (o[j][1] * inv + z0), f1 * (o[j][2] * inv + z1),
                    f1 * (o[j][3] * inv + z1));
  }
  __syncthreads();
  const std::int64_t first_partial = first_row * p.num_splits + split;
  for (int i = tid; i < T::kNTiles * 32; i += kFastThreads) {
    const int j = i / 32;
    const int ln = i % 32;
    float4 v = frag[j * 32 + ln];
#pragma unroll
    for (int w = 1; w < T::kWarps; ++w) {
      const float4 x = frag[(w * T::kNTiles + j) * 32 + ln];
      v.x += x.x;
      v.y += x.y;
      v.z += x.z;
      v.w += x.w;
    }
    // Fragment (n-tile j, lane ln): rows ln/4 and ln/4 + 8, dims (2c)*D/8 + j and (2c+1)*D/8 + j.
    const int r = ln >> 2;
    const int d0 = (2 * (ln & 3)) * (D / 8) + j;
    if (r < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{r} * p.num_splits) * D;
      dst[d0] = v.x;
      dst[d0 + D / 8] = v.y;
    }
    if (r + 8 < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{r + 8} * p.num_splits) * D;
      dst[d0] = v.z;
      dst[d0 + D / 8] = v.w;
    }
  }
  if (tid < heads) {
    float big = -core::kInf;
    for (int w = 0; w < T::kWarps; ++w) big = fmaxf(big, warp_max[w][tid]);
    float sum = 0.0f;
    for (int w = 0; w < T::kWarps; ++w) {
      const float m = warp_max[w][tid];
      sum += m == -core::kInf ? 0.0f : fast_exp2(m - big) * warp_sum[w][tid];
    }
    float* ml = p.partial_ml + (first_partial + std::int64_t{tid} * p.num_splits) * 2;
    ml[0] = big;
    ml[1] = sum;
  }
}

}  // namespace turboquant::cuda::detail
