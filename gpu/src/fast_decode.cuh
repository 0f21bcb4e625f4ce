// Fast decode: tensor cores (mma.sync m16n8k16, fp16 operands, fp32
// accumulation), relative L2 <= 1e-3 against the golden model.
//
// One block per (split, KV head x chunk of <= 8 query heads, sequence), eight
// warps (4-bit keys) or four. Tokens are the M = 16 rows and the query heads of
// the GQA group the N = 8 columns of every mma (S^T = K Q^T, O^T += V^T P^T),
// so each K/V byte is read once per group, the query stays in registers as B
// fragments, and a 16-token tile costs D/16 mma for the scores and D/16 for the
// values. Each warp streams its own 16-token tiles (tile i of the split goes to
// warp i % warps) through a 3-stage cp.async pipeline in shared memory and
// keeps its own online-softmax state; the warps' states are combined at the end
// into one partial per split, in the same workspace format as the strict kernel,
// and merge_kernel finishes. The first copies are issued before the query and
// table preparation, so their latency overlaps it.
//
// Dequantization happens in registers, straight into mma fragments:
//   keys   A operand of S^T, k = head_dim. Lane (g = lane/4, c = lane%4) owns
//          the contiguous dims [c*D/4, (c+1)*D/4) of tokens g and g + 8, i.e.
//          one contiguous byte chunk each; the query's B fragments use the same
//          dim permutation. Lloyd-Max codes go through a pair table in shared
//          memory (one byte / 6 bits -> two fp16 centroids, 32
//          interleaved copies against bank conflicts); FP8 e4m3 converts
//          exactly with cvt.f16x2.e4m3x2. Scores are then multiplied by the
//          fp16 key norm of their token (the row).
//   values A operand of O^T, k = tokens. v = code * scale + zero is split as
//          code * (p * scale) + p * zero: the B operand is P^T * scale (the
//          score fragment, scaled per token row, transposed in registers with
//          movmatrix), the A operand the exact integer code (times a power of
//          two, undone at the end), and p * zero a per-head fp32 term added
//          once at the end. Lane g owns value chunk g (D/8 contiguous dims);
//          rows g and g + 8 of m-tile j are its local dims 2j and 2j + 1.
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

template <int D, int KB, int VB>
struct FastTraits {
  // The 4-bit pair table (32 KB with 32 copies) is shared by eight warps; the
  // 3-bit table (8 KB) and FP8 keys do better with blocks of four.
  static constexpr int kWarps = KB == 4 ? 8 : 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = (D <= 128 ? 16 : 8) / kWarps;  // 16 (8) warps per SM
  static constexpr int kStages = 3;
  static constexpr int kHeads = kFastHeadsPerBlock;  // mma N: query heads
  static constexpr int kTile = 16;                   // tokens per tile: mma M for S^T, mma K for O^T
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
  // lane l reads copy l, so every lookup is one wavefront. (16 copies of the
  // 4-bit table left lanes l and l + 16 on one bank: 48% excess wavefronts.)
  static constexpr int kLutCopies = 32;
  static constexpr int kLutShift = log2_int(4 * kLutCopies);  // byte offset of entry e = e << kLutShift
  static constexpr int kKSteps = D / 16;  // of S^T
  static constexpr int kMTiles = D / 16;  // of O^T
  static constexpr int kLutBytes = kLutEntries * kLutCopies * 4;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  static constexpr int kPrepBytes = 2 * kHeads * D * 4;  // prepared query + dense-rotation scratch
  // The final combine: each warp's accumulator fragments as float4 per (m-tile,
  // lane). It reuses the pipeline region (every warp is past its loop by then).
  static constexpr int kCombineBytes = kWarps * kMTiles * 32 * 16;
  static constexpr int kWorkBytes = max_int(kPipeBytes, kCombineBytes);
  static constexpr int kSmemBytes = kWorkBytes + kLutBytes + kPrepBytes;
  static_assert(kRecordBytes % 4 == 0, "records must allow 4-byte copies");
  static_assert(D % 64 == 0, "D/4 dims per lane must hold whole 3-bit groups and whole words");
};

// Key fragment for k-step ks: dims 4ks, 4ks+1 (r0) and 4ks+2, 4ks+3 (r1) of the
// lane's key chunk, one token (a row of the A operand of S^T).
// Lloyd-Max codes: two pair-table lookups; the byte offset of an entry is its
// index << kShift (copies of 4 bytes), so one shift and one and-or form the address.
template <int KB, int kShift, int W>
__device__ __forceinline__ void key_fragment(const std::uint32_t (&kw)[W], int ks, const std::uint8_t* lut_lane,
                                             std::uint32_t lane_off, std::uint32_t& r0, std::uint32_t& r1) {
  if constexpr (KB == 8) {
    r0 = e4m3x2_to_half2(kw[ks] & 0xffffu);
    r1 = e4m3x2_to_half2(kw[ks] >> 16);
  } else {
    constexpr int kPairBits = 2 * KB;
    constexpr std::uint32_t kMask = ((1u << kPairBits) - 1u) << kShift;
    const int p0 = 4 * KB * ks;
    const int p1 = p0 + kPairBits;
    const std::uint32_t o0 = and_or(shifted_bits(kw, p0, kShift), kMask, lane_off);
    const std::uint32_t o1 = and_or(shifted_bits(kw, p1, kShift), kMask, lane_off);
    r0 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o0);
    r1 = *reinterpret_cast<const std::uint32_t*>(lut_lane + o1);
  }
}

// A fragment register of V^T: (code of token a, code of token b) at the lane's
// local value dim j, as exact fp16 values code * value_frag_scale<VB>(j).
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
__global__ void __launch_bounds__(FastTraits<D, KB, VB>::kThreads, FastTraits<D, KB, VB>::kMinBlocks)
    fast_decode_kernel(DecodeParams p) {
  using T = FastTraits<D, KB, VB>;
  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint8_t* work = smem;
  std::uint8_t* lut = smem + T::kWorkBytes;
  float* prep = reinterpret_cast<float*>(smem + T::kWorkBytes + T::kLutBytes);
  __shared__ std::uint32_t centroid_half[16];
  __shared__ float warp_max[T::kWarps][T::kHeads];
  __shared__ float warp_sum[T::kWarps][T::kHeads];

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

  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;  // fragment row group: key tokens g and g + 8; value chunk g; query head g
  const int c = lane & 3;   // quad position: key chunk c; score columns (heads) 2c, 2c + 1
  const int num_tiles = (range.size() + T::kTile - 1) / T::kTile;
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + T::kWarps - 1) / T::kWarps : 0;
  std::uint8_t* const stages = work + warp * T::kStages * T::kStageBytes;

  // Copy cursor: the next tile this warp issues, as (page, slot), and its block id.
  constexpr int kWarpStep = T::kWarps * T::kTile;  // tokens between a warp's tiles
  const std::int64_t block_bytes = l.block_bytes();
  // Offsets inside a block fit in 32 bits (the host sends blocks of 2^31 bytes
  // and more to the strict kernel).
  const int record_stride = l.num_kv_heads * T::kRecordBytes;  // between slots of one head
  int issue_page = 0, issue_slot = 0, issue_block = 0;
  if (my_tiles > 0) {
    const int tok = range.begin + warp * T::kTile;
    issue_page = tok / l.block_size;
    issue_slot = tok % l.block_size;
    issue_block = block_row[issue_page];
  }
  int issued = 0;
  // This lane's share of a tile copy, fixed for every tile: the records are
  // kTile x kUnits pieces of kCopyUnit bytes (piece u = lane + 32 i), and lanes
  // 0 .. 2 kMetaFields - 1 copy one 16-byte half of a metadata field each.
  constexpr int kUnits = T::kRecordBytes / T::kCopyUnit;
  constexpr int kPieces = (T::kTile * kUnits + 31) / 32;
  constexpr bool kEvenPieces = 32 % kUnits == 0;  // then piece i is row r0 + i * (32 / kUnits), same column
  int piece_src[kEvenPieces ? 1 : kPieces];  // from the tile's first record of this head
  int piece_dst[kEvenPieces ? 1 : kPieces];           // in the stage
#pragma unroll
  for (int i = 0; i < (kEvenPieces ? 1 : kPieces); ++i) {
    const int u = lane + 32 * i;
    const int r = u / kUnits;
    const int ch = (u % kUnits) * T::kCopyUnit;
    piece_src[i] = kv_head * T::kRecordBytes + r * record_stride + ch;
    piece_dst[i] = r * T::kRowBytes + ch;
  }
  const int piece_row_step = (kEvenPieces ? 32 / kUnits : 0) * record_stride;
  int meta_src = 0;
  if (lane < 2 * T::kMetaFields) {
    const int field = lane / 2 + (T::kFp8 ? 1 : 0);
    meta_src = static_cast<int>(l.meta_field_offset(0, kv_head, static_cast<core::MetaField>(field))) + (lane % 2) * 16;
  }
  const int meta_dst = T::kTile * T::kRowBytes + lane * 16;
  auto issue = [&](std::uint8_t* dst) {
    const std::uint8_t* block = p.cache + issue_block * block_bytes;
    const std::uint8_t* first = block + issue_slot * record_stride;
    if constexpr (kEvenPieces) {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        cp_async<T::kCopyUnit>(dst + piece_dst[0] + i * (32 / kUnits) * T::kRowBytes,
                               first + piece_src[0] + i * piece_row_step);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        if (T::kTile * kUnits % 32 == 0 || lane + 32 * i < T::kTile * kUnits) {
          cp_async<T::kCopyUnit>(dst + piece_dst[i], first + piece_src[i]);
        }
      }
    }
    if (lane < 2 * T::kMetaFields) cp_async<16>(dst + meta_dst, block + meta_src + 2 * issue_slot);
    ++issued;
    issue_slot += kWarpStep;
    while (issue_slot >= l.block_size) {
      issue_slot -= l.block_size;
      ++issue_page;
    }
    if (issued < my_tiles) issue_block = block_row[issue_page];  // used one iteration later
  };

  // The pipeline's first stages go out before the preparation below.
  std::uint8_t* issue_stage = stages;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < my_tiles) issue(issue_stage);
    cp_async_commit();
    issue_stage += T::kStageBytes;
  }

  // Pair table: entry e -> (c[e & mask], c[e >> KB]) as fp16x2, interleaved copies.
  if constexpr (!T::kFp8) {
    if (tid < (1 << KB)) {
      float cv = 0.0f;
#pragma unroll
      for (int k = 0; k < (1 << KB); ++k) cv = k == tid ? p.codebook.centroids[k] : cv;
      centroid_half[tid] = pack_half2(cv, 0.0f);
    }
    __syncthreads();
    uint4* lut128 = reinterpret_cast<uint4*>(lut);  // four copies per store
    for (int i = tid; i < T::kLutEntries * T::kLutCopies / 4; i += T::kThreads) {
      const int e = i / (T::kLutCopies / 4);
      const std::uint32_t v = centroid_half[e & ((1 << KB) - 1)] | (centroid_half[e >> KB] << 16);
      lut128[i] = make_uint4(v, v, v, v);
    }
  }
  // Queries: prepared in fp32 exactly as the golden model (prepare_queries ends
  // with a barrier, which also publishes the pair table), then this lane's B
  // fragments: head g, dims c*D/4 + 4ks + {0, 1} and {2, 3}; heads past the
  // chunk are zero columns.
  std::uint32_t qb[T::kKSteps][2];
  {
    prepare_queries<D>(p, first_row, heads, prep, prep + T::kHeads * D);
    const float* q = prep + g * D + c * (D / 4);
#pragma unroll
    for (int ks = 0; ks < T::kKSteps; ++ks) qb[ks][0] = qb[ks][1] = 0u;
    if (g < heads) {
#pragma unroll
      for (int ks = 0; ks < T::kKSteps; ++ks) {
        qb[ks][0] = pack_half2(q[4 * ks], q[4 * ks + 1]);
        qb[ks][1] = pack_half2(q[4 * ks + 2], q[4 * ks + 3]);
      }
    }
  }
  const std::uint32_t lut_lane_off = (lane % T::kLutCopies) * 4;

  float o[T::kMTiles][4];  // O^T: (dim row g, heads 2c, 2c+1), (dim row g + 8, heads 2c, 2c+1)
#pragma unroll
  for (int j = 0; j < T::kMTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -core::kInf, m1 = -core::kInf;  // heads 2c, 2c + 1
  float l0 = 0.0f, l1 = 0.0f;                // this lane's share of their sums
  float z0 = 0.0f, z1 = 0.0f;                // this lane's share of sum p * zero

  const std::uint8_t* st = stages;
  int tok0 = range.begin + warp * T::kTile;
  for (int it = 0; it < my_tiles; ++it) {
    cp_async_wait<T::kStages - 2>();
    __syncwarp();
    if (it + T::kStages - 1 < my_tiles) issue(issue_stage);
    cp_async_commit();
    issue_stage = issue_stage == stages + (T::kStages - 1) * T::kStageBytes ? stages : issue_stage + T::kStageBytes;

    const __half* meta = reinterpret_cast<const __half*>(st + T::kTile * T::kRowBytes);
    const int valid = min(T::kTile, range.end - tok0);

    // S^T = K Q^T: rows tokens g, g + 8; columns heads 2c, 2c + 1.
    std::uint32_t kw[2][T::kKeyWords];
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + g * T::kRowBytes + c * T::kKeyChunk, kw[0]);
    load_chunk<T::kKeyChunk, T::kKeyAlign>(st + (g + 8) * T::kRowBytes + c * T::kKeyChunk, kw[1]);
    // Two accumulator chains (even and odd k-steps) halve the dependent mma latency.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int ks = 0; ks < T::kKSteps; ++ks) {
      uint4 a;
      key_fragment<KB, T::kLutShift>(kw[0], ks, lut, lut_lane_off, a.x, a.z);
      key_fragment<KB, T::kLutShift>(kw[1], ks, lut, lut_lane_off, a.y, a.w);
      mma_16816(ks % 2 ? s_odd : s, a, qb[ks][0], qb[ks][1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i] += s_odd[i];
    constexpr int kScaleField = T::kFp8 ? 0 : 1;
    float scale0 = __half2float(meta[kScaleField * 16 + g]);
    float scale1 = __half2float(meta[kScaleField * 16 + g + 8]);
    float zero0 = __half2float(meta[(kScaleField + 1) * 16 + g]);
    float zero1 = __half2float(meta[(kScaleField + 1) * 16 + g + 8]);
    if constexpr (!T::kFp8) {
      const float n0 = __half2float(meta[g]);
      const float n1 = __half2float(meta[g + 8]);
      s[0] *= n0;
      s[1] *= n0;
      s[2] *= n1;
      s[3] *= n1;
    }
    if (valid < T::kTile) {  // the split's last tile: tokens past its end weigh nothing
      if (g >= valid) {
        s[0] = s[1] = -core::kInf;
        scale0 = zero0 = 0.0f;
      }
      if (g + 8 >= valid) {
        s[2] = s[3] = -core::kInf;
        scale1 = zero1 = 0.0f;
      }
    }
    // Online softmax (base 2) per head column; the column max spans the 8 lanes of a c.
    float mx0 = fmaxf(s[0], s[2]);
    float mx1 = fmaxf(s[1], s[3]);
#pragma unroll
    for (int x = 4; x <= 16; x <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
    }
    const float new0 = fmaxf(m0, mx0);
    const float new1 = fmaxf(m1, mx1);
    const float ref0 = new0 == -core::kInf ? 0.0f : new0;
    const float ref1 = new1 == -core::kInf ? 0.0f : new1;
    const float alpha0 = fast_exp2(m0 - ref0);
    const float alpha1 = fast_exp2(m1 - ref1);
    m0 = new0;
    m1 = new1;
    s[0] = fast_exp2(s[0] - ref0);
    s[1] = fast_exp2(s[1] - ref1);
    s[2] = fast_exp2(s[2] - ref0);
    s[3] = fast_exp2(s[3] - ref1);
    l0 = l0 * alpha0 + (s[0] + s[2]);
    l1 = l1 * alpha1 + (s[1] + s[3]);
    z0 = z0 * alpha0 + (s[0] * zero0 + s[2] * zero1);
    z1 = z1 * alpha1 + (s[1] * zero0 + s[3] * zero1);
    if (__any_sync(0xffffffffu, alpha0 != 1.0f || alpha1 != 1.0f)) {
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j) {
        o[j][0] *= alpha0;
        o[j][1] *= alpha1;
        o[j][2] *= alpha0;
        o[j][3] *= alpha1;
      }
    }
    // O^T += V^T (P^T * scale). B: tokens 2c, 2c+1 | 8+2c, 9+2c (k) x head g (n).
    const std::uint32_t pb0 = transpose_8x8(pack_half2(s[0] * scale0, s[1] * scale0));
    const std::uint32_t pb1 = transpose_8x8(pack_half2(s[2] * scale1, s[3] * scale1));
    std::uint32_t vw[4][T::kValueWords];
    const std::uint8_t* vbase = st + T::kKeyBytes + g * T::kValueChunk;
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c) * T::kRowBytes, vw[0]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 1) * T::kRowBytes, vw[1]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 8) * T::kRowBytes, vw[2]);
    load_chunk<T::kValueChunk, T::kValueAlign>(vbase + (2 * c + 9) * T::kRowBytes, vw[3]);
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) {
      const uint4 a = make_uint4(value_fragment<VB>(vw[0], vw[1], 2 * j), value_fragment<VB>(vw[0], vw[1], 2 * j + 1),
                                 value_fragment<VB>(vw[2], vw[3], 2 * j), value_fragment<VB>(vw[2], vw[3], 2 * j + 1));
      mma_16816(o[j], a, pb0, pb1);
    }
    st = st == stages + (T::kStages - 1) * T::kStageBytes ? stages : st + T::kStageBytes;
    tok0 += kWarpStep;
  }
  cp_async_wait<0>();

  // Combine the warps' states into this split's partial. Column sums span
  // the 8 lanes of a c.
#pragma unroll
  for (int x = 4; x <= 16; x <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, x);
    l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    z0 += __shfl_xor_sync(0xffffffffu, z0, x);
    z1 += __shfl_xor_sync(0xffffffffu, z1, x);
  }
  if (g == 0) {
    warp_max[warp][2 * c] = m0;
    warp_max[warp][2 * c + 1] = m1;
    warp_sum[warp][2 * c] = l0;
    warp_sum[warp][2 * c + 1] = l1;
  }
  __syncthreads();  // every warp is done with its pipeline stages and has posted its max
  pdl_launch_dependents();  // the merge grid may start launching (it waits for this grid)
  float big0 = -core::kInf, big1 = -core::kInf;
#pragma unroll
  for (int w = 0; w < T::kWarps; ++w) {
    big0 = fmaxf(big0, warp_max[w][2 * c]);
    big1 = fmaxf(big1, warp_max[w][2 * c + 1]);
  }
  const float f0 = m0 == -core::kInf ? 0.0f : fast_exp2(m0 - big0);
  const float f1 = m1 == -core::kInf ? 0.0f : fast_exp2(m1 - big1);
  // Each warp stores its rescaled fragments (value scale 2^k undone, zero-point
  // term added) as one float4 per (m-tile, lane): conflict-free, no serialization.
  float4* frag = reinterpret_cast<float4*>(smem);  // [warps][m-tiles][32]
#pragma unroll
  for (int j = 0; j < T::kMTiles; ++j) {
    const float inv_lo = 1.0f / value_frag_scale<VB>(2 * j);  // exact: powers of two
    const float inv_hi = 1.0f / value_frag_scale<VB>(2 * j + 1);
    frag[(warp * T::kMTiles + j) * 32 + lane] =
        make_float4(f0 * (o[j][0] * inv_lo + z0), f1 * (o[j][1] * inv_lo + z1), f0 * (o[j][2] * inv_hi + z0),
                    f1 * (o[j][3] * inv_hi + z1));
  }
  __syncthreads();
  const std::int64_t first_partial = first_row * p.num_splits + split;
  for (int i = tid; i < T::kMTiles * 32; i += T::kThreads) {
    const int j = i / 32;
    const int ln = i % 32;
    float4 v = frag[j * 32 + ln];
#pragma unroll
    for (int w = 1; w < T::kWarps; ++w) {
      const float4 x = frag[(w * T::kMTiles + j) * 32 + ln];
      v.x += x.x;
      v.y += x.y;
      v.z += x.z;
      v.w += x.w;
    }
    // Fragment (m-tile j, lane ln): heads 2(ln%4), 2(ln%4)+1; dims (ln/4)*D/8 + 2j, + 1.
    const int h = 2 * (ln & 3);
    const int d0 = (ln >> 2) * (D / 8) + 2 * j;
    if (h < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{h} * p.num_splits) * D + d0;
      dst[0] = v.x;
      dst[1] = v.z;
    }
    if (h + 1 < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{h + 1} * p.num_splits) * D + d0;
      dst[0] = v.y;
      dst[1] = v.w;
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
