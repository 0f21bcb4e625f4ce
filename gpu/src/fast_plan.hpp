// The fast kernel's split plan: vLLM's split length rounded up to whole
// 16-token tiles (at least kFastMinSplitTokens), so that every tile starts at a
// multiple of 16 tokens and (with block_size % 16 == 0) lies inside one cache
// block. Fast mode is not bit-exact, so it is free to cut the work differently
// from the golden model; the host picks the number of splits for occupancy.
#pragma once

#include <cstdint>

#include "params.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

// Splits shorter than this are not cut (one 16-token tile per warp of a block).
inline constexpr int kFastMinSplitTokens = 64;

TQ_HD constexpr int fast_split_len(int seq_len, int splits) {
  const int len = (core::split_len(seq_len, splits) + core::kTileTokens - 1) / core::kTileTokens * core::kTileTokens;
  return len > kFastMinSplitTokens ? len : kFastMinSplitTokens;
}

TQ_HD constexpr core::TokenRange fast_split_range(int seq_len, int splits, int split) {
  const std::int64_t len = fast_split_len(seq_len, splits);
  const std::int64_t begin = len * split;
  if (begin >= seq_len) return core::TokenRange{seq_len, seq_len};
  const std::int64_t end = begin + len < seq_len ? begin + len : seq_len;
  return core::TokenRange{static_cast<int>(begin), static_cast<int>(end)};
}

// The plan a kernel (and the merge after it) uses.
TQ_HD constexpr core::TokenRange plan_range(bool tile_aligned, int seq_len, int splits, int split) {
  return tile_aligned ? fast_split_range(seq_len, splits, split) : core::split_range(seq_len, splits, split);
}

// Number of non-empty splits of a plan; they are the prefix 0 .. n-1 (a split
// is empty exactly when it starts at or past seq_len).
TQ_HD constexpr int plan_nonempty(bool tile_aligned, int seq_len, int splits) {
  if (seq_len <= 0) return 0;
  const int len = tile_aligned ? fast_split_len(seq_len, splits) : core::split_len(seq_len, splits);
  const int n = (seq_len + len - 1) / len;
  return n < splits ? n : splits;
}

// Warps of a fast block (FastTraits::kWarps). The 4-bit pair table (32 KB
// with 32 copies) is shared by eight warps; the 3-bit table (8 KB) and FP8
// keys do better with blocks of four.
TQ_HD constexpr int fast_format_warps(int key_bits) { return key_bits == 4 ? 8 : 4; }
// Two column tiles over long splits: twelve warps of at most 168 registers in
// one block per SM (kFastDeepWarps, DecodeParams::fast_warps). In blocks of
// the format's warps (one 8-warp block per SM at 205 registers for 4-bit keys)
// the two-tile loop stalled on its own dependencies: 48% issue-active,
// against 67% for the single-token kernel at 16 warps per SM. Twelve warps ran
// 16 x 32768 q_len 4 and 8 in 0.77-0.88x the time, every format, but short
// splits in 1.03-1.09x (1 x 4096 q_len 4 and 8: splits of 256 and 512
// tokens); 1 x 4096 q_len 16, splits of 1024 tokens, 0.985x
// (docs/PERFORMANCE.md round 17; sixteen warps spill in the loop).
inline constexpr int kFastDeepWarps = 12;
inline constexpr int kFastDeepMinSplitTokens = 1024;
TQ_HD constexpr bool fast_deep_pays_off(std::int64_t max_seq_tokens, std::int64_t splits) {
  return max_seq_tokens / (splits > 1 ? splits : 1) >= kFastDeepMinSplitTokens;
}
static_assert(fast_deep_pays_off(32768, 1) && fast_deep_pays_off(4096, 4) && fast_deep_pays_off(8192, 2) &&
              !fast_deep_pays_off(4096, 16) && !fast_deep_pays_off(4096, 8) && !fast_deep_pays_off(512, 1));

// Blocks of fused heads (fast_decode.cuh's kKvHeads > 1): a block takes
// several KV heads of a split, its warps dealt out to them, so that the slots
// of neighbouring KV heads, which share DRAM sectors and 128-byte lines in an
// AoS cache, are read together by one block. One column tile (single-token
// rows; multi-token rows and windows of up to 8 columns a block): one KV head
// a warp, the format's warps a block. Two column tiles: 4 KV heads a block
// (the twelve-warp blocks' three warps a head, the format's one or two).
// For the AoS instances whose loads share 16-byte units and sectors with the
// neighbouring heads' on every slot, those pacing is for too (pace_plan.hpp):
// tensor copies (4bit_nc, k3v4_nc) and FP8 keys (k8v4); the 3-bit cp.async
// instance (3bit_nc) took 1.02-1.05x its unfused time at 32 x 8192 on H100s
// (PERFORMANCE.md round 29). KV heads must fill whole blocks; the Hadamard
// rotation or FP8 keys (the block prepares its heads' queries in fp16: a
// dense rotation needs the block's fp32 scratch); not the wide kernel.
// head_dim up to kFastFusedMaxHeadDim: a head_dim 256 slot spans four or more
// 64-byte lines of its own, and fused blocks there ran 1.0-1.07x the unfused
// time on an H100 (k3v4_nc, k8v4; PERFORMANCE.md round 30), while at 64 and 128 they
// ran 0.82-1.03x (head_dim 64: 0.87-0.95x for the tensor-copy rows, 1.00-1.03x for FP8).
// fast_grid.cpp takes them where their grid fills the device and each warp
// streams a long run of its head's tiles (fast_fused_pays_off).
inline constexpr int kFastFusedTwoTileHeads = 4;
TQ_HD constexpr int fast_fused_kv_heads(int column_tiles, int key_bits) {
  return column_tiles == 1 ? fast_format_warps(key_bits) : kFastFusedTwoTileHeads;
}
// A fused block fills the device with kKvHeads times the splits of one head a
// block, so its splits are that much shorter; its fixed costs (the heads'
// queries, the pair table, the per-head combine of the warps) and the merge of
// the extra splits then weigh against the shared lines it saves unless each
// warp streams at least kFastFusedMinWarpTokens of its head. On H100s
// (PERFORMANCE.md rounds 29-30) warps of 1024 tokens or more gained (32 x 8192
// and 16 x 32768: 0.82-1.0x the unfused time), warps of 341 or fewer lost
// (8 x 8192 q_len 1-4: 1.07-1.22x; 1 x 4096 q_len 4-16: 1.4-2.1x).
// warps_per_head: the block's warps over its KV heads.
inline constexpr int kFastFusedMinWarpTokens = 512;
TQ_HD constexpr bool fast_fused_pays_off(std::int64_t max_seq_tokens, std::int64_t splits, int warps_per_head) {
  return max_seq_tokens / (splits > 1 ? splits : 1) / (warps_per_head > 1 ? warps_per_head : 1) >=
         kFastFusedMinWarpTokens;
}
static_assert(fast_fused_pays_off(8192, 8, 1) && fast_fused_pays_off(32768, 4, 3) &&
              !fast_fused_pays_off(8192, 32, 1) && !fast_fused_pays_off(8192, 8, 3) &&
              !fast_fused_pays_off(4096, 32, 2));
inline constexpr int kFastFusedMaxHeadDim = 128;
TQ_HD constexpr bool fast_fusable_heads(bool aos, int head_dim, int column_tiles, int key_bits, int num_kv_heads,
                                        bool dense_rotation, bool tensor_copy) {
  return aos && head_dim <= kFastFusedMaxHeadDim && (column_tiles == 1 || column_tiles == 2) &&
         (tensor_copy || key_bits == core::kFp8KeyBits) &&
         num_kv_heads % fast_fused_kv_heads(column_tiles, key_bits) == 0 && !dense_rotation;
}
// (aos, head_dim, column tiles, key bits, KV heads, dense rotation, tensor copies)
static_assert(fast_fusable_heads(true, 128, 1, 4, 8, false, true) &&
              fast_fusable_heads(true, 128, 1, 3, 4, false, true) &&
              fast_fusable_heads(true, 128, 1, 8, 4, false, false) &&
              fast_fusable_heads(true, 128, 2, 4, 4, false, true));
static_assert(!fast_fusable_heads(true, 128, 1, 3, 4, false, false) &&
              !fast_fusable_heads(true, 128, 1, 4, 4, false, true) &&
              !fast_fusable_heads(false, 128, 1, 4, 8, false, true) &&
              !fast_fusable_heads(true, 128, 8, 4, 8, false, true) &&
              !fast_fusable_heads(true, 128, 1, 8, 8, true, false) &&
              !fast_fusable_heads(true, 128, 2, 4, 6, false, true) &&
              !fast_fusable_heads(true, 256, 1, 8, 4, false, false));
static_assert(fast_fusable_heads(true, 64, 2, 4, 8, false, true));

// Whether a fast decode runs the kRows instance (masked columns: multi-token
// rows, windows) rather than the single-token one (fast_launch.cuh).
TQ_HD constexpr bool fast_rows_kernel(bool has_query_start_loc, int sliding_window) {
  return has_query_start_loc || sliding_window != 0;
}

// Multi-token rows (query_rows.cuh's FastRows): a block takes several rows of
// one sequence as its mma columns, 8 per column tile.
//
// Column tiles per block, from the (row, head) columns per sequence on
// average (rows x group / batch: the host's view, query_start_loc stays on
// the device), for a group of at most 8:
//   up to 8    one (the single-token kernel's shape);
//   9 to 32    two, so that each dequantized key and value fragment feeds two
//              mma (the tile is read and dequantized once per 16 columns);
//   above 32   eight: the wide kernel (wide_decode.cuh: four warps, 64
//              columns, the tile dequantized once into shared memory for all).
// Measured on the H200 (docs/PERFORMANCE.md round 15): with 32 columns per
// sequence the wide kernel, half idle, took 1.04-1.57x the time of two
// blocks of two tiles (a two-warp wide kernel of 32 columns: 1.53-2.17x); with
// 64 it took 0.60x (16 x 32768) and 0.86-0.93x (8 x 8192).
// D 256 keeps one: its O^T fragments alone would take 128 registers per column
// tile. The wide kernel needs the Hadamard rotation or FP8 keys (its prepared
// query takes the room of a dense rotation's scratch): two tiles otherwise.
inline constexpr int kFastWideColumnTiles = 8;
// DecodeParams::fast_warps of a wide plan whose blocks are warpgroups in roles
// (wide_specialized.cuh: two producers and two consumers of four warps).
inline constexpr int kWideSpecializedWarps = 16;
TQ_HD constexpr bool fast_has_two_column_tiles(int head_dim) { return head_dim <= 128; }
TQ_HD constexpr int fast_column_tiles(bool has_query_start_loc, int group, std::int64_t rows, int batch,
                                      int head_dim, bool dense_rotation = false) {
  if (!has_query_start_loc || !fast_has_two_column_tiles(head_dim) || group > kFastHeadsPerBlock) return 1;
  const std::int64_t columns = rows * group;  // over the batch
  const std::int64_t per_tile = std::int64_t{kFastHeadsPerBlock} * batch;
  if (columns > 4 * per_tile && !dense_rotation) return kFastWideColumnTiles;
  return columns > per_tile ? 2 : 1;
}
// The wide kernel sets up each block (the pair table, 64 prepared query
// columns) and writes 64 partials at its end, a fixed cost that only splits of
// several 64-token steps repay. The plan cuts each sequence into about
// resident blocks / units splits ((row block, KV head) units, one wave), so the
// wide kernel is taken while those splits hold at least kWideMinSplitTokens of
// the longest sequence the block table can hold (max_seq_tokens; the host does
// not read seq_lens). Measured on the H200 (docs/PERFORMANCE.md round 16, 264
// resident blocks), wide against two-tile blocks, us: 1 x 4096 q 16 at GQA 4
// (8 units, 33 splits of 128 tokens) 28.5 / 23.3; 1 x 32768 q 16 (33 splits of
// 1024) 73.4 / 94.7; 1 x 4096 q 128 (64 units, splits of 1024) 90.7 / 124.1;
// 8 x 8192 q 16 139.5 / 209.8; 16 x 32768 q 16 781.6 / 1368.6. A line through
// the first two puts the break-even near 300 tokens.
inline constexpr int kWideMinSplitTokens = 512;
TQ_HD constexpr bool wide_pays_off(std::int64_t units, std::int64_t resident_blocks, std::int64_t max_seq_tokens) {
  const std::int64_t splits = resident_blocks / (units > 0 ? units : 1);
  return max_seq_tokens / (splits > 1 ? splits : 1) >= kWideMinSplitTokens;
}
static_assert(!wide_pays_off(8, 264, 4096) && wide_pays_off(64, 264, 4096) && wide_pays_off(8, 264, 32768) &&
              wide_pays_off(64, 264, 32768) && wide_pays_off(64, 264, 8192) && wide_pays_off(512, 264, 8192) &&
              wide_pays_off(512, 264, 4096) && wide_pays_off(128, 264, 32768) && !wide_pays_off(8, 264, 8192));

// Rows per fast block: one without query_start_loc (a row is a sequence);
// with it, as many rows as leave room for the chunk's heads in the block's
// 8 x column_tiles columns.
TQ_HD constexpr int fast_rows_per_block(bool has_query_start_loc, int group, int column_tiles = 1) {
  const int columns = kFastHeadsPerBlock * column_tiles;
  return !has_query_start_loc || group >= columns ? 1 : columns / group;
}
// The fast grid's z extent. With query_start_loc, sequence b owns the block
// indices [C_b, C_{b+1}) with C_b = query_start_loc[b] / R + b: at least
// ceil(q_len_b / R) of them (the rest idle), and C_B = rows / R + batch is
// known on the host without reading query_start_loc (CUDA-graph safe).
TQ_HD constexpr std::int64_t fast_row_blocks(bool has_query_start_loc, int rows, int batch, int rows_per_block) {
  return has_query_start_loc ? std::int64_t{rows} / rows_per_block + batch : rows;
}

static_assert(fast_row_blocks(true, 10, 3, 2) == 8 && fast_rows_per_block(true, 4) == 2 && fast_rows_per_block(true, 16) == 1);
static_assert(fast_rows_per_block(true, 4, 2) == 4 && fast_rows_per_block(true, 8, 2) == 2 && fast_rows_per_block(true, 3, 2) == 5);
static_assert(fast_column_tiles(true, 4, 32, 16, 128) == 1 && fast_column_tiles(true, 4, 33, 16, 128) == 2);
static_assert(fast_column_tiles(true, 4, 128, 16, 128) == 2 && fast_column_tiles(true, 4, 129, 16, 128) == kFastWideColumnTiles &&
              fast_column_tiles(true, 4, 129, 16, 128, true) == 2 && fast_rows_per_block(true, 4, 8) == 16);
static_assert(fast_column_tiles(false, 4, 64, 1, 128) == 1 && fast_column_tiles(true, 4, 64, 1, 256) == 1 &&
              fast_column_tiles(true, 16, 64, 1, 128) == 1);

static_assert(fast_split_range(4096, 32, 1).begin == 128);
static_assert(fast_split_range(4096, 128, 1).begin == 64);
static_assert(fast_split_range(37, 32, 0).end == 37);
static_assert(fast_split_range(37, 32, 1).empty());
static_assert(fast_split_range(1000, 7, 6).begin == 864 && fast_split_range(1000, 7, 6).end == 1000);
static_assert(plan_nonempty(false, 37, 32) == 19 && core::split_range(37, 32, 18).end == 37);
static_assert(plan_nonempty(true, 37, 32) == 1 && plan_nonempty(true, 4096, 132) == 64);
static_assert(plan_nonempty(false, 0, 32) == 0 && plan_nonempty(false, 5000, 32) == 32);

}  // namespace turboquant::cuda::detail
