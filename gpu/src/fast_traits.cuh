// The fast decode's compile-time plan: warps, tiles, pipeline stages and the
// shared-memory regions of one block (fast_decode.cuh describes the kernel).
// Record sizes come from core::Format; everything else here is the kernel's
// own staging layout (rows padded against bank conflicts, the pair table).
#pragma once

#include "params.hpp"
#include "turboquant/core/block_layout.hpp"

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
  static constexpr bool kFp8 = KB == core::kFp8KeyBits;
  // The format's sizes (norm correction changes none of them).
  static constexpr core::Format kFormat = core::make_format(D, KB, VB);
  static constexpr int kKeyBytes = kFormat.key_data_bytes();
  static constexpr int kValueBytes = kFormat.value_data_bytes();
  static constexpr int kRecordBytes = kFormat.data_bytes();
  static constexpr int kMetaFields = kFormat.meta_fields();
  // The stored position of a metadata field (FP8 formats store no key norm).
  __host__ __device__ static constexpr int field(core::MetaField f) { return kFormat.field_index(f); }
  // The cache's layout with the format's sizes known at compile time (the
  // host dispatched on the format, so they equal l.format's).
  __device__ static constexpr core::BlockLayout layout(const core::BlockLayout& l) {
    return core::BlockLayout{kFormat, l.block_size, l.num_kv_heads};
  }
  // Stage layout: kTile record rows of kRowBytes, then the tile's metadata,
  // field i (stored order) as kTile fp16 values at kTile * kRowBytes + 32 i.
  static constexpr int kRowBytes = padded_row_bytes(kRecordBytes);
  static constexpr int kMetaStageBytes = kTile * 2;  // one field of a tile
  static constexpr int kStageBytes = kTile * kRowBytes + kMetaFields * kMetaStageBytes;
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
  // Shared memory: [work: pipeline stages | final combine] [pair table] [query].
  static constexpr int kLutBytes = kLutEntries * kLutCopies * 4;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  static constexpr int kPrepBytes = 2 * kHeads * D * 4;  // prepared query + dense-rotation scratch
  // The final combine: each warp's accumulator fragments as float4 per (m-tile,
  // lane). It reuses the pipeline region (every warp is past its loop by then).
  static constexpr int kCombineBytes = kWarps * kMTiles * 32 * 16;
  static constexpr int kWorkBytes = max_int(kPipeBytes, kCombineBytes);
  static constexpr int kLutOffset = kWorkBytes;
  static constexpr int kPrepOffset = kWorkBytes + kLutBytes;
  static constexpr int kSmemBytes = kWorkBytes + kLutBytes + kPrepBytes;
  static_assert(kRecordBytes % 4 == 0, "records must allow 4-byte copies");
  static_assert(D % 64 == 0, "D/4 dims per lane must hold whole 3-bit groups and whole words");
};

// The power of two the value codes of local dim j carry in their A fragment
// (value_fragment leaves them at their bit position); undone in the epilogue.
template <int VB>
__host__ __device__ constexpr float value_frag_scale(int j) {
  return VB == 4 ? ((j % 2) ? 16.0f : 1.0f) : (j % 3 == 0 ? 1.0f : (j % 3 == 1 ? 8.0f : 64.0f));
}

}  // namespace turboquant::cuda::detail
