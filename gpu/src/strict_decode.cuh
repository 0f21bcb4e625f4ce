// Strict decode: bit-exact with decode_reference (cpu/reference/decode_ref.cpp).
// One WARP per (split, KV head x chunk of H query heads, sequence); a block holds
// kStrictWarps warps = kStrictWarps consecutive splits of the same (sequence,
// chunk), which share the prepared query (the only block-wide barriers are in
// the query preparation at the start). vLLM's split plan (core::split_range),
// tiles of kTileTokens = 16 tokens from the split start, each tile:
//   staging   the warp copies the 16 records into its own shared-memory rows
//             (cp.async of 16/8/4 bytes, whatever the cache alignment allows;
//             2-byte copies otherwise; AoS slots that are not 16-byte
//             multiples: the 16-byte chunks that hold them in a 16-byte
//             aligned cache, else (4k + 2 bytes) their whole words and the
//             other 2 bytes with the metadata), double-buffered:
//             tile i + 1 is in flight while tile i is computed; lanes 0..15
//             read the token's fp16 metadata (core::read_meta,
//             core::read_key_norm) one tile ahead, and the block ids two
//             tiles ahead
//   scores    lane (j = lane & 15, tg = lane >> 4) is dot16 lane j of the 8
//             tokens t = 2i + tg and all H heads: the contract's
//             fma_rn(q[base + j], key[base + j], lanes[j]) for base = 0, 16, ...
//             (q for its dims in registers, the key decoded from the staged bits
//             with the codebook / an exact e4m3 or e4b15 -> fp16 -> fp32
//             conversion). The fixed tree
//             (j + 8, + 4, + 2, + 1) is evaluated as a reduce-scatter butterfly:
//             at mask m each lane keeps half of its values and adds the partner's
//             copy (add_rn is commutative), so every (head, token) sum follows
//             exactly the tree of core::reduce_lanes16. Then core::key_score
//             (AoS _nc: with core::decoded_key_norm of dot16(c, c), whose lanes
//             go through the same tree; core::decode_key_norm).
//   softmax   core::softmax_fold_tile's steps, in its order: the tile max and the
//             sum are sequential over the tile's tokens (every lane of head
//             lane % H runs the same chain); the exponentials exp2_tq(s - ref)
//             are independent and spread over the lanes.
//   values    lane owns dims [E*lane, E*lane + E) of all H heads: core::rescale,
//             then core::accumulate per token in token order, the value from
//             core::dequant_value.
// No block barrier inside the token loop; the warp synchronizes with __syncwarp.
// The per-split partial (max, sum, acc) goes to the workspace; merge_kernel
// combines the splits. The tile phases are in strict_phases.cuh, the staging
// in strict_stage.cuh; strict_split.cuh is the kernel for small grids.
#pragma once

#include "query_prep.cuh"
#include "query_rows.cuh"
#include "strict_phases.cuh"

namespace turboquant::cuda::detail {

// Splits (warps) per block. 2 spreads small batches over more SMs than 4; measured on
// the H200 the two are within noise (docs/PERFORMANCE.md, round 2 step 9).
inline constexpr int kStrictWarps = 2;
inline constexpr int kStrictThreads = 32 * kStrictWarps;

template <int D, int KB, int VB, int H, class C>
struct StrictShared : StrictRecord<D, KB, VB, C> {
  using Record = StrictRecord<D, KB, VB, C>;
  struct Warp {
    alignas(16) std::uint32_t raw[2][core::kTileTokens][Record::kRow];  // double buffer (cp.async)
    alignas(16) float4 meta[core::kTileTokens];  // (value scale, value zero, key norm, -)
    alignas(16) float scores[H][core::kTileTokens];
    alignas(16) float probs[core::kTileTokens][H];
  };
  alignas(16) float q[H][D];
  alignas(16) float scratch[H][D];  // dense query rotation
  Warp warp[kStrictWarps];
};

// Dynamic shared memory: sizeof(StrictShared<D, KB, VB, H, C>); C: CacheKind.
template <int D, int KB, int VB, int H, class C>
__global__ void __launch_bounds__(kStrictThreads) strict_decode_kernel(DecodeParams p) {
  using Shared = StrictShared<D, KB, VB, H, C>;
  using Record = typename Shared::Record;
  extern __shared__ __align__(16) std::uint8_t strict_smem[];
  Shared& sm = *reinterpret_cast<Shared*>(strict_smem);
  constexpr int kT = core::kTileTokens;
  constexpr int E = D / 32;       // value dims per lane

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int split = blockIdx.x * kStrictWarps + warp;
  const StrictBlockHeads<H> blk(p);
  const core::Format& f = p.layout.format;
  const QueryRow row = query_row(p, blk.b);

  // A static array: its address is a constant, so a lookup is one LDS [offset + imm].
  __shared__ float centroids[core::kMaxCodebookSize];
  if (threadIdx.x < core::kMaxCodebookSize) centroids[threadIdx.x] = p.codebook.centroids[threadIdx.x];
  prepare_queries<D, H, kStrictWarps>(p, blk.first_row, blk.heads, &sm.q[0][0], &sm.scratch[0][0]);  // ends with a barrier
  if (split >= p.plan_splits) return;
  const core::TokenRange range = core::row_split_range(row.attended, p.plan_splits, split);
  if (range.empty()) return;  // the merge skips empty splits

  typename Shared::Warp& ws = sm.warp[warp];
  const int tg = lane >> 4;
  float qr[H][D / 16];
  load_strict_query<D, H>(sm.q, blk.heads, lane & 15, qr);
  core::SoftmaxState state;
  float acc[H][E] = {};
  const TreeSlots<H> slots(lane);

  // Software pipeline over the tiles: while tile i is computed, the records of
  // tile i + 1 are in flight (cp.async into the other buffer), its metadata in
  // registers, and the block ids of tile i + 2 are being loaded.
  const StrictTileSource<Record> src(p, row.b, range, blk.kv_head, lane);
  const int tl = lane & 15;
  int blk_next;  // block id of this lane's token in the next tile
  float4 meta_cur;
  {
    const int blk0 = src.block_of(range.begin);
    src.stage(ws.raw[0], src.record_of(range.begin, blk0), min(kT, range.end - range.begin));
    cp_async_commit();
    meta_cur = src.meta_of(range.begin, blk0);
    blk_next = src.block_of(range.begin + kT);
  }

  const auto shift = src.template row_shift<C>();
  int buf = 0;
  for (int tile = range.begin; tile < range.end; tile += kT, buf ^= 1) {
    const int n = min(kT, range.end - tile);
    const int next = tile + kT;
    const float4 meta_now = meta_cur;
    const std::uint8_t* rec_next = nullptr;
    if (next < range.end) {  // (inline: as a helper this look-ahead cost 8 registers)
      rec_next = src.record_of(next, blk_next);
      meta_cur = src.meta_of(next, blk_next);
      blk_next = src.block_of(next + kT);
    }
    __syncwarp();  // the previous tile's readers of ws (meta, the other buffer) are done
    if (next < range.end) src.stage(ws.raw[buf ^ 1], rec_next, min(kT, range.end - next));
    cp_async_commit();
    if (tg == 0) {  // rows past the tile's end get zero metadata (shift 0: row_shift_bytes)
      src.stage_meta(ws.meta[tl], ws.raw[buf][tl], tl < n ? meta_now : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    }
    cp_async_wait<1>();  // this tile's records have landed
    __syncwarp();
    const std::uint32_t (*raw)[Shared::kRow] = ws.raw[buf];

    strict_tile_scores<Record, H>(shift, raw, qr, centroids, f, ws.meta, slots, lane, ws.scores);
    __syncwarp();

    const float alpha = strict_softmax_tile<H>(ws.scores, ws.probs, n, lane, state);
    strict_tile_values<E, H, Record>(shift, acc, alpha, raw, ws.meta, ws.probs, n,
                                     Record::kValueOffset * 8 + VB * E * lane);
  }
  strict_write_partial<D, H, E>(p, blk, split, acc, E * lane, state, true, lane);
}

}  // namespace turboquant::cuda::detail
