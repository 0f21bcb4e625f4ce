// Strict decode: bit-exact with decode_reference (cpu/reference/decode_ref.cpp).
// One WARP per (split, KV head x chunk of H query heads, sequence); a block holds
// kStrictWarps warps = kStrictWarps consecutive splits of the same (sequence,
// chunk), which share the prepared query (the only block-wide barriers are in
// the query preparation at the start). vLLM's split plan (core::split_range),
// tiles of kTileTokens = 16 tokens from the split start, each tile:
//   staging   the warp copies the 16 records into its own shared-memory rows
//             (cp.async of 16/8/4 bytes, whatever the cache alignment allows;
//             2-byte copies otherwise), double-buffered: tile i + 1 is in
//             flight while tile i is computed; lanes 0..15 read the token's
//             fp16 metadata (core::read_meta, core::decode_key_norm) one tile
//             ahead, and the block ids two tiles ahead
//   scores    lane (j = lane & 15, tg = lane >> 4) is dot16 lane j of the 8
//             tokens t = 2i + tg and all H heads: the contract's
//             fma_rn(q[base + j], key[base + j], lanes[j]) for base = 0, 16, ...
//             (q for its dims in registers, the key decoded from the staged bits
//             with the codebook / an exact e4m3 -> fp16 -> fp32 conversion). The fixed tree
//             (j + 8, + 4, + 2, + 1) is evaluated as a reduce-scatter butterfly:
//             at mask m each lane keeps half of its values and adds the partner's
//             copy (add_rn is commutative), so every (head, token) sum follows
//             exactly the tree of core::reduce_lanes16. Then core::key_score.
//   softmax   core::softmax_fold_tile's steps, in its order: the tile max and the
//             sum are sequential over the tile's tokens (every lane of head
//             lane % H runs the same chain); the exponentials exp2_tq(s - ref)
//             are independent and spread over the lanes.
//   values    lane owns dims [E*lane, E*lane + E) of all H heads: core::rescale,
//             then core::accumulate per token in token order, the value from
//             core::dequant_value.
// No block barrier inside the token loop; the warp synchronizes with __syncwarp.
// The per-split partial (max, sum, acc) goes to the workspace; merge_kernel
// combines the splits.
#pragma once

#include "mma_utils.cuh"
#include "params.hpp"
#include "query_prep.cuh"
#include "turboquant/core/reduction.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

// Splits (warps) per block. 2 spreads small batches over more SMs than 4; measured on
// the H200 the two are within noise (docs/PERFORMANCE.md, round 2 step 9).
inline constexpr int kStrictWarps = 2;
inline constexpr int kStrictThreads = 32 * kStrictWarps;

template <int D, int KB, int VB, int H>
struct StrictShared {
  static constexpr int kKeyBytes = KB == 8 ? D : D * KB / 8;
  static constexpr int kRecordBytes = kKeyBytes + D * VB / 8;  // = format.data_bytes()
  static_assert(kRecordBytes % 8 == 0 && kKeyBytes % 8 == 0, "head_dim 64/128/256 records are 8-byte multiples");
  static constexpr int kRecordWords = kRecordBytes / 4;
  // Row stride in words: a multiple of 4 (16-byte stores) and 4 mod 8, so the two
  // tokens read at once (rows t, t + 1) land 4+ banks apart; >= 1 word of slack
  // for the two-word bit reads.
  static constexpr int kRow = (kRecordWords + 7) / 8 * 8 + 4;
  struct Warp {
    alignas(16) std::uint32_t raw[2][core::kTileTokens][kRow];  // double buffer (cp.async)
    alignas(16) float4 meta[core::kTileTokens];  // (value scale, value zero, key norm, -)
    alignas(16) float scores[H][core::kTileTokens];
    alignas(16) float probs[core::kTileTokens][H];
  };
  alignas(16) float q[H][D];
  alignas(16) float scratch[H][D];  // dense query rotation
  Warp warp[kStrictWarps];
};

// `bits` (<= 24) bits of a staged row starting at bit `pos` (two words when
// they may straddle a word boundary).
template <int kBits>
__device__ __forceinline__ std::uint32_t row_bits(const std::uint32_t* row, int pos) {
  const int w = pos >> 5;
  const int sh = pos & 31;
  if constexpr (32 % kBits == 0) {
    return row[w] >> sh;  // aligned fields never straddle
  } else {
    return __funnelshift_r(row[w], row[w + 1], sh);
  }
}

template <int KB>
__device__ __forceinline__ float strict_key(const std::uint32_t* row, int d, const float* centroids) {
  if constexpr (KB == 8) {
    // e4m3 -> fp16 -> fp32 is exact, so this equals core::fp8_e4m3_to_float for
    // every non-NaN byte; a NaN key only feeds fma_rn, whose NaN result is
    // the canonical NaN either way.
    return unpack_half2(e4m3x2_to_half2((row[d >> 2] >> (8 * (d & 3))) & 0xffu)).x;
  } else if constexpr (KB == 4) {
    // Code (d & 7) of word d >> 3, rotated right by 4 (d & 7) - 2 so that it lands
    // at bits 2..5 already times 4: one funnel shift and one mask form the byte
    // offset of its centroid.
    const std::uint32_t w = row[d >> 3];
    const std::uint32_t offset = __funnelshift_r(w, w, (4 * (d & 7) + 30) & 31) & 0x3cu;
    return *reinterpret_cast<const float*>(reinterpret_cast<const std::uint8_t*>(centroids) + offset);
  } else {
    return centroids[row_bits<3>(row, 3 * d) & 7u];
  }
}

// One level of the dot16 tree over the 16 lanes of a half warp (xor `mask`).
// N >= 2: reduce-scatter (each lane keeps half of its N values); N == 1: both
// partners compute the sum.
template <int N>
__device__ __forceinline__ void tree_level(float* a, int lane, int mask) {
  if constexpr (N >= 2) {
    const bool upper = (lane & mask) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float send = upper ? a[i] : a[i + N / 2];
      const float keep = upper ? a[i + N / 2] : a[i];
      a[i] = core::add_rn(keep, __shfl_xor_sync(0xffffffffu, send, mask));
    }
  } else {
    a[0] = core::add_rn(a[0], __shfl_xor_sync(0xffffffffu, a[0], mask));
  }
}

// Copies the n records of a tile into the warp's rows: cp.async of V bytes
// (V = 16, 8, 4; completes at the caller's cp_async_wait), or synchronous
// 2-byte copies for caches aligned to 2 bytes only.
template <int V, int W>
__device__ __forceinline__ void stage_records(std::uint32_t (*raw)[W], const std::uint8_t* rec, int n, int lane,
                                              int bytes_per_record) {
  using T = std::conditional_t<V == 16, uint4, std::conditional_t<V == 8, uint2, std::conditional_t<V == 4, std::uint32_t, std::uint16_t>>>;
  const int per = bytes_per_record / V;
  const int total = n * per;
  for (int base = 0; base < total; base += 32) {
    const int c = base + lane;
    const int t = min(c / per, core::kTileTokens - 1);
    const auto* src = reinterpret_cast<const T*>(
        __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(rec), t));
    if (c < total) {
      if constexpr (V == 2) {
        reinterpret_cast<T*>(raw[t])[c - t * per] = src[c - t * per];
      } else {
        cp_async<V>(reinterpret_cast<T*>(raw[t]) + (c - t * per), src + (c - t * per));
      }
    }
  }
}

// Where lane `lane`'s results of the score tree land: values [vbase, vbase +
// kKeep) of the V = 8H (token i, head g) sums (index i * H + g); `writer` is
// false for the duplicate of an all-reduce level.
template <int H>
struct TreeSlots {
  static constexpr int kValues = 8 * H;
  static constexpr int kKeep = kValues >= 16 ? kValues / 16 : 1;
  int vbase = 0;
  bool writer = true;
  __device__ explicit TreeSlots(int lane) {
    int nv = kValues;
#pragma unroll
    for (int m = 8; m >= 1; m >>= 1) {
      if (nv >= 2) {
        if (lane & m) vbase += nv / 2;
        nv /= 2;
      } else if (lane & m) {
        writer = false;
      }
    }
  }
};

// Scores of one staged tile for H heads (one warp): lane (j = lane & 15, tg =
// lane >> 4) is dot16 lane j of tokens 2i + tg; the tree, then core::key_score
// with the token's norm (meta[t].z), into scores[head][t]. Rows past the tile's
// end hold stale bytes; their sums are never used.
template <int D, int KB, int H, int kRow>
__device__ __forceinline__ void strict_tile_scores(const std::uint32_t (*raw)[kRow], const float (&qr)[H][D / 16],
                                                   const float* centroids, const core::Format& f, const float4* meta,
                                                   const TreeSlots<H>& slots, int lane,
                                                   float (*scores)[core::kTileTokens]) {
  constexpr int kSteps = D / 16;
  constexpr int V = 8 * H;
  const int j = lane & 15;
  const int tg = lane >> 4;
  float s[V];
#pragma unroll
  for (int v = 0; v < V; ++v) s[v] = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t* row = raw[2 * i + tg];
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const float key = strict_key<KB>(row, j + 16 * k, centroids);
#pragma unroll
      for (int g = 0; g < H; ++g) s[i * H + g] = core::fma_rn(qr[g][k], key, s[i * H + g]);
    }
  }
  tree_level<V>(s, lane, 8);
  tree_level<(V >= 4 ? V / 2 : 1)>(s, lane, 4);
  tree_level<(V >= 8 ? V / 4 : 1)>(s, lane, 2);
  tree_level<(V >= 16 ? V / 8 : 1)>(s, lane, 1);
  if (slots.writer) {
#pragma unroll
    for (int i = 0; i < TreeSlots<H>::kKeep; ++i) {
      const int v = slots.vbase + i;
      const int t = 2 * (v / H) + tg;
      scores[v % H][t] = core::key_score(f, s[i], meta[t].z);
    }
  }
}

// core::softmax_fold_tile for head hs = lane % H, in its order: every lane of
// head hs runs the max and sum chains; the exponentials are spread over the
// lanes (probs[t][head]). Returns alpha for head hs. The caller synchronizes the
// warp before and after (scores in, probs out).
template <int H>
__device__ __forceinline__ float strict_softmax_tile(const float (*scores)[core::kTileTokens],
                                                     float (*probs)[H], int n, int lane, core::SoftmaxState& state) {
  constexpr int kT = core::kTileTokens;
  const int hs = lane % H;
  float tile_max = scores[hs][0];
#pragma unroll
  for (int t = 1; t < kT; ++t) {
    if (t < n) tile_max = core::max_f(tile_max, scores[hs][t]);
  }
  const float new_max = core::max_f(state.max, tile_max);
  const float ref = (new_max == -core::kInf) ? 0.0f : new_max;
  const float alpha = core::exp2_tq(core::sub_rn(state.max, ref));
#pragma unroll
  for (int k = 0; k < (16 * H >= 32 ? 16 * H / 32 : 1); ++k) {
    const int t = lane / H + k * (32 / H);
    if (t < n) probs[t][hs] = core::exp2_tq(core::sub_rn(scores[hs][t], ref));
  }
  __syncwarp();
  float sum = core::mul_rn(state.sum, alpha);
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t < n) sum = core::add_rn(sum, probs[t][hs]);
  }
  state.max = new_max;
  state.sum = sum;
  return alpha;
}

// The value phase of one tile for E consecutive dims starting at first_dim and
// all H heads: core::rescale by each head's alpha (held by lane g of the warp),
// then core::accumulate token by token, the value from core::dequant_value.
template <int VB, int E, int H, int kRow>
__device__ __forceinline__ void strict_tile_values(float (&acc)[H][E], float alpha, const std::uint32_t (*raw)[kRow],
                                                   const float4* meta, const float (*probs)[H], int n, int value_bit) {
#pragma unroll
  for (int g = 0; g < H; ++g) {
    const float a = __shfl_sync(0xffffffffu, alpha, g);
#pragma unroll
    for (int e = 0; e < E; ++e) acc[g][e] = core::rescale(acc[g][e], a);
  }
#pragma unroll 4
  for (int t = 0; t < n; ++t) {
    const float4 m = meta[t];
    float pr[H];
#pragma unroll
    for (int g = 0; g < H; ++g) pr[g] = probs[t][g];
    const std::uint32_t bits = row_bits<VB * E>(raw[t], value_bit);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      // core::dequant_value(code, scale, zero) = fma_rn(float(code), scale, zero), with
      // float(code) formed exactly as (2^23 + code) - 2^23 (no quarter-rate I2F).
      const float code = __fsub_rn(__uint_as_float(0x4b000000u | ((bits >> (VB * e)) & ((1u << VB) - 1))), 8388608.0f);
      const float v = core::fma_rn(code, m.x, m.y);
#pragma unroll
      for (int g = 0; g < H; ++g) acc[g][e] = core::accumulate(acc[g][e], pr[g], v);
    }
  }
}

// Where the tiles of one split come from, for a warp of either strict kernel:
// lane tl = lane & 15 owns token tile_start + tl for block ids, record
// addresses and fp16 metadata (lanes 16..31 of the metadata read nothing).
struct StrictTileSource {
  const DecodeParams& p;
  const std::int32_t* block_row;
  core::TokenRange range;
  int kv_head;
  int lane;
  int vec;  // the widest copy the cache alignment allows: 16, 8, 4 or 2 bytes

  __device__ StrictTileSource(const DecodeParams& params, int b, core::TokenRange r, int head, int lane_id,
                              int record_bytes)
      : p(params), block_row(params.block_table + std::int64_t{b} * params.max_blocks_per_seq), range(r),
        kv_head(head), lane(lane_id) {
    const std::uint64_t align = reinterpret_cast<std::uintptr_t>(p.cache) |
                                static_cast<std::uint64_t>(p.layout.block_bytes()) | record_bytes;
    vec = (align & 15) == 0 ? 16 : (align & 7) == 0 ? 8 : (align & 3) == 0 ? 4 : 2;
  }
  __device__ int token(int tile_start) const { return tile_start + (lane & 15); }
  __device__ int block_of(int tile_start) const {
    const int t = token(tile_start);
    return t < range.end ? block_row[t / p.layout.block_size] : 0;
  }
  __device__ const std::uint8_t* record_of(int tile_start, int blk) const {
    const int t = token(tile_start);
    if (t >= range.end) return nullptr;
    return p.cache + p.layout.block_base(blk) + p.layout.key_data_offset(t % p.layout.block_size, kv_head);
  }
  // (value scale, value zero, key norm, 0) of the lane's token.
  __device__ float4 meta_of(int tile_start, int blk) const {
    const int t = token(tile_start);
    if (lane >= 16 || t >= range.end) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const core::BlockLayout& l = p.layout;
    const std::uint8_t* block = p.cache + l.block_base(blk);
    const int slot = t % l.block_size;
    return make_float4(core::read_meta(l, block, slot, kv_head, core::MetaField::kValueScale),
                       core::read_meta(l, block, slot, kv_head, core::MetaField::kValueZero),
                       core::decode_key_norm(l, block, slot, kv_head), 0.0f);
  }
  // Copies the n records starting at rec (lane t's pointer) into rows.
  template <int W>
  __device__ void stage(std::uint32_t (*rows)[W], const std::uint8_t* rec, int n, int record_bytes) const {
    switch (vec) {
      case 16: stage_records<16>(rows, rec, n, lane, record_bytes); break;
      case 8: stage_records<8>(rows, rec, n, lane, record_bytes); break;
      case 4: stage_records<4>(rows, rec, n, lane, record_bytes); break;
      default: stage_records<2>(rows, rec, n, lane, record_bytes); break;
    }
  }
};

// The query of this lane's dot16 lane j for H heads (dims j, j + 16, ...), from
// the prepared query in shared memory; heads past `heads` are zero.
template <int D, int H>
__device__ __forceinline__ void load_strict_query(const float (*q)[D], int heads, int j, float (&qr)[H][D / 16]) {
#pragma unroll
  for (int g = 0; g < H; ++g) {
#pragma unroll
    for (int k = 0; k < D / 16; ++k) qr[g][k] = g < heads ? q[g][j + 16 * k] : 0.0f;
  }
}

// Dynamic shared memory: sizeof(StrictShared<D, KB, VB, H>).
template <int D, int KB, int VB, int H>
__global__ void __launch_bounds__(kStrictThreads) strict_decode_kernel(DecodeParams p) {
  using Shared = StrictShared<D, KB, VB, H>;
  extern __shared__ __align__(16) std::uint8_t strict_smem[];
  Shared& sm = *reinterpret_cast<Shared*>(strict_smem);
  constexpr int kT = core::kTileTokens;
  constexpr int kSteps = D / 16;  // dims per dot16 lane
  constexpr int E = D / 32;       // value dims per lane

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int split = blockIdx.x * kStrictWarps + warp;
  const int kv_head = blockIdx.y / p.chunks_per_kv_head;
  const int chunk = blockIdx.y % p.chunks_per_kv_head;
  const int b = blockIdx.z;
  const core::BlockLayout& l = p.layout;
  const core::Format& f = l.format;
  const int seq_len = p.seq_lens[b];
  const int first_head = chunk * H;
  const int heads = min(H, p.group - first_head);  // query heads of this block
  const int first_q = kv_head * p.group + first_head;
  const std::int64_t first_row = std::int64_t{b} * p.num_q_heads + first_q;

  // A static array: its address is a constant, so a lookup is one LDS [offset + imm].
  __shared__ float centroids[core::kMaxCodebookSize];
  if (threadIdx.x < core::kMaxCodebookSize) centroids[threadIdx.x] = p.codebook.centroids[threadIdx.x];
  prepare_queries<D>(p, first_row, heads, &sm.q[0][0], &sm.scratch[0][0]);  // ends with a barrier
  if (split >= p.plan_splits) return;
  const core::TokenRange range = core::split_range(seq_len, p.plan_splits, split);
  if (range.empty()) return;  // the merge skips empty splits

  typename Shared::Warp& ws = sm.warp[warp];
  const int j = lane & 15;
  const int tg = lane >> 4;

  float qr[H][kSteps];
  load_strict_query<D, H>(sm.q, heads, j, qr);
  core::SoftmaxState state;
  float acc[H][E] = {};

  const TreeSlots<H> slots(lane);

  // Software pipeline over the tiles: while tile i is computed, the records of
  // tile i + 1 are in flight (cp.async into the other buffer), its metadata in
  // registers, and the block ids of tile i + 2 are being loaded.
  const StrictTileSource src(p, b, range, kv_head, lane, Shared::kRecordBytes);
  const int tl = lane & 15;
  int blk_next;  // block id of this lane's token in the next tile
  float4 meta_cur;
  {
    const int blk0 = src.block_of(range.begin);
    src.stage(ws.raw[0], src.record_of(range.begin, blk0), min(kT, range.end - range.begin), Shared::kRecordBytes);
    cp_async_commit();
    meta_cur = src.meta_of(range.begin, blk0);
    blk_next = src.block_of(range.begin + kT);
  }

  int buf = 0;
  for (int tile = range.begin; tile < range.end; tile += kT, buf ^= 1) {
    const int n = min(kT, range.end - tile);
    const int next = tile + kT;
    const float4 meta_now = meta_cur;
    const std::uint8_t* rec_next = nullptr;
    if (next < range.end) {
      rec_next = src.record_of(next, blk_next);
      meta_cur = src.meta_of(next, blk_next);
      blk_next = src.block_of(next + kT);
    }
    __syncwarp();  // the previous tile's readers of ws (meta, the other buffer) are done
    if (next < range.end) src.stage(ws.raw[buf ^ 1], rec_next, min(kT, range.end - next), Shared::kRecordBytes);
    cp_async_commit();
    if (tg == 0 && tl < n) ws.meta[tl] = meta_now;
    cp_async_wait<1>();  // this tile's records have landed
    __syncwarp();
    const std::uint32_t (*raw)[Shared::kRow] = ws.raw[buf];

    strict_tile_scores<D, KB, H, Shared::kRow>(raw, qr, centroids, f, ws.meta, slots, lane, ws.scores);
    __syncwarp();

    const float alpha = strict_softmax_tile<H>(ws.scores, ws.probs, n, lane, state);
    strict_tile_values<VB, E, H, Shared::kRow>(acc, alpha, raw, ws.meta, ws.probs, n,
                                               Shared::kKeyBytes * 8 + VB * E * lane);
  }

  pdl_launch_dependents();  // the merge grid may start launching (it waits for this grid)
  const std::int64_t first_partial = first_row * p.num_splits + split;  // (row, split) of head 0
#pragma unroll
  for (int g = 0; g < H; ++g) {
    if (g < heads) {
      float* dst = p.partial_acc + (first_partial + std::int64_t{g} * p.num_splits) * D + E * lane;
#pragma unroll
      for (int e = 0; e < E; e += 2) *reinterpret_cast<float2*>(dst + e) = make_float2(acc[g][e], acc[g][e + 1]);
    }
  }
  if (lane < heads) {
    float* ml = p.partial_ml + (first_partial + std::int64_t{lane} * p.num_splits) * 2;
    ml[0] = state.max;
    ml[1] = state.sum;
  }
}

}  // namespace turboquant::cuda::detail
