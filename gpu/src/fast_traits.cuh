// The fast decode's compile-time plan: warps, tiles, pipeline stages and the
// shared-memory regions of one block (fast_decode.cuh describes the kernel),
// for both cache layouts (core::LayoutKind). Record sizes and in-slot offsets
// come from core::Format; everything else here is the kernel's own staging
// layout (rows padded against bank conflicts, the pair table) and the
// permutation of dims over lanes.
#pragma once

#include "fast_plan.hpp"
#include "tensor_box.hpp"
#include "params.hpp"
#include "turboquant/core/block_layout.hpp"

namespace turboquant::cuda::detail {

constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }
constexpr int max_int(int a, int b) { return a > b ? a : b; }
constexpr int log2_int(int a) { return a <= 1 ? 0 : 1 + log2_int(a / 2); }
// TC: tiles arrive by tensor copies (tensor_box.hpp) into the same stage
// rows as the cp.async loader's. NT: column tiles, the mma n-tiles of 8 columns
// a warp computes from each dequantized fragment (fast_plan.hpp's
// fast_column_tiles: 2 for multi-token rows with more than 8 columns).
// W: warps per block (0: the format's, fast_format_warps in fast_plan.hpp;
// two column tiles over long splits take kFastDeepWarps, the wide
// multi-token kernel, wide_decode.cuh, kWideWarps).
// ST: pipeline stages per warp (wide_specialized.cuh's producers take 2).
template <int D, int KB, int VB, core::LayoutKind L = core::LayoutKind::kSoA,
          core::Fp8Format F8 = core::Fp8Format::kE4m3, bool TC = false, int NT = 1, int W = 0, int ST = 3>
struct FastTraits {
  static constexpr int kDim = D;
  static constexpr int kKeyBits = KB;
  static constexpr int kValueBits = VB;
  static constexpr core::LayoutKind kLayout = L;
  static constexpr core::Fp8Format kFp8Format = F8;
  static constexpr bool kAos = L == core::LayoutKind::kAoS;
  static constexpr bool kTensorCopy = TC;
  static constexpr int kWarps = W != 0 ? W : fast_format_warps(KB);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kColumnTiles = NT;
  // 16 (8) warps per SM; half as many with two column tiles (their O^T
  // fragments take twice the registers), or one block of kFastDeepWarps.
  static constexpr int kMinBlocks = max_int((D <= 128 ? 16 : 8) / kWarps / NT, 1);
  static constexpr int kStages = ST;
  static constexpr int kHeads = kFastHeadsPerBlock;  // mma N: the columns of one column tile
  static constexpr int kColumns = kHeads * NT;       // (row, head) columns of a block
  static constexpr int kTile = 16;                   // tokens per tile: mma M for S^T, mma K for O^T
  static constexpr bool kFp8 = KB == core::kFp8KeyBits;
  // The format's sizes (norm correction and the FP8 flavour change none of them).
  static constexpr core::Format kFormat = core::make_format(D, KB, VB, false, L);
  static constexpr int kKeyBytes = kFormat.key_data_bytes();
  static constexpr int kValueBytes = kFormat.value_data_bytes();
  static constexpr int kRecordBytes = kFormat.record_bytes();  // SoA: key + value codes; AoS: the slot
  static constexpr int kValueOffset = kFormat.value_record_offset();  // value codes inside a record
  static constexpr int kMetaFields = kFormat.meta_fields();
  // The stored position of a metadata field (FP8 formats store no key norm).
  __host__ __device__ static constexpr int field(core::MetaField f) { return kFormat.field_index(f); }
  // AoS: where a metadata field sits inside the slot.
  __host__ __device__ static constexpr int aos_field_offset(core::MetaField f) {
    return kFormat.aos_meta_offset(kFormat.field_index(f));
  }
  // The cache's layout with the format's sizes known at compile time (the
  // host dispatched on the format, so they equal l.format's).
  __device__ static constexpr core::BlockLayout layout(const core::BlockLayout& l) {
    return core::BlockLayout{kFormat, l.block_size, l.num_kv_heads};
  }

  // Stage layout. SoA: kTile record rows of kRowBytes, then the tile's
  // metadata, field i (stored order) as kTile fp16 values at kTile * kRowBytes
  // + 32 i. AoS (either loader): kTile rows of kRowBytes, row r holding the
  // 16-byte units that cover slot r (the slot starts at the slot address mod
  // 16 in its row).
  static constexpr int kAosSpanUnits = aos_span_units(kFormat);
  static constexpr int kRowBytes = stage_row_bytes(kFormat);
  static constexpr int kMetaStageBytes = kTile * 2;  // SoA: one field of a tile
  static_assert(kMetaStageBytes == kMetaBoxBytes, "the SoA metadata box is one field of a tile");
  // The bytes of a tile's copies; tensor copies need stages 128-byte aligned.
  static constexpr int kTileBytes = kTile * kRowBytes + (kAos ? 0 : kMetaFields * kMetaStageBytes);
  static constexpr int kStageBytes = TC ? (kTileBytes + 127) / 128 * 128 : kTileBytes;
  static constexpr bool kTensorCopyFits = tensor_copy_format(kFormat);       // every fast kernel's choice
  static constexpr bool kTensorCopyBoxable = tensor_copy_boxable(kFormat);  // the wide kernel's
  static constexpr int kCopyUnit = gcd_int(kRecordBytes, 16);
  static constexpr int kKeyChunk = kKeyBytes / 4;    // bytes per lane (D/4 dims)
  static constexpr int kValueChunk = kValueBytes / 8;  // bytes per lane (D/8 dims)
  static constexpr int kKeyWords = (kKeyChunk + 3) / 4;
  static constexpr int kValueWords = (kValueChunk + 3) / 4;
  static constexpr int kKeyAlign = gcd_int(kKeyChunk, 16);
  static constexpr int kValueAlign = gcd_int(gcd_int(kKeyBytes, kValueChunk), 16);

  // Which dims a lane holds. SoA: key lane c the contiguous dims [c D/4,
  // (c+1) D/4), value lane g [g D/8, (g+1) D/8) (one wide load each). AoS
  // (4-byte loads at 2-byte aligned slots): 4-bit and FP8 keys and 4-bit
  // values are dealt out in words (key lane c: words c, c + 4, ...; value lane
  // g: words g, g + 8, ...), which spreads a load's lanes over the banks; 3-bit
  // codes keep contiguous chunks (their groups of 8 codes span 3 bytes).
  static constexpr bool kKeyWordsInterleaved = kAos && KB != 3;
  static constexpr bool kValueWordsInterleaved = kAos && VB == 4;
  static constexpr int kKeyUnitDims = kKeyWordsInterleaved ? 32 / KB : D / 4;  // dims of a key unit (word or chunk)
  static constexpr int kValueUnitDims = kValueWordsInterleaved ? 32 / VB : D / 8;
  // Dim of local key dim j of lane c (the query's B fragments use the same map).
  __host__ __device__ static constexpr int key_dim(int c, int j) {
    return kKeyUnitDims * (c + 4 * (j / kKeyUnitDims)) + j % kKeyUnitDims;
  }
  // Dim of local value dim j of lane group g (the output rows of O^T).
  __host__ __device__ static constexpr int value_dim(int g, int j) {
    return kValueUnitDims * (g + 8 * (j / kValueUnitDims)) + j % kValueUnitDims;
  }

  static constexpr int kLutEntries = kFp8 ? 0 : 1 << (2 * KB);
  // Copies of the pair table, interleaved (entry e, copy k at word e * copies + k):
  // lane l reads copy l, so every lookup is one wavefront. (16 copies of the
  // 4-bit table left lanes l and l + 16 on one bank: 48% excess wavefronts.)
  static constexpr int kLutCopies = 32;
  static constexpr int kLutShift = log2_int(4 * kLutCopies);  // byte offset of entry e = e << kLutShift
  // AoS Lloyd-Max keys: the tile step also sums the squares of the keys'
  // centroids (the per-token norm correction, fast_stage.cuh).
  static constexpr bool kNormFromSquares = kAos && !kFp8;
  static constexpr int kKSteps = D / 16;  // of S^T
  static constexpr int kMTiles = D / 16;  // of O^T
  // Shared memory: [work: pipeline stages | final combine] [pair table] [query].
  static constexpr int kLutBytes = kLutEntries * kLutCopies * 4;
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  // Tensor copies write 128-byte aligned stages (and the SoA metadata box at
  // kTile * kRowBytes, a multiple of 256): the kernel rounds the work region's start up.
  static constexpr int kWorkAlign = TC ? 128 : 16;
  static constexpr int kPrepBytes = 2 * kColumns * D * 4;  // prepared query + dense-rotation scratch
  // The final combine: each warp's accumulator fragments as float4 per (m-tile,
  // lane). It reuses the pipeline region (every warp is past its loop by then).
  static constexpr int kCombineBytes = kWarps * NT * kMTiles * 32 * 16;
  static constexpr int kWorkBytes = max_int(kPipeBytes, kCombineBytes) + (kWorkAlign - 16);
  static constexpr int kLutOffset = kWorkBytes;
  static constexpr int kPrepOffset = kWorkBytes + kLutBytes;
  static constexpr int kSmemBytes = kWorkBytes + kLutBytes + kPrepBytes;
  // Fused heads (fast_decode.cuh's kKvHeads, fast_plan.hpp's
  // fast_fused_kv_heads): the block's KV heads' query columns, prepared in
  // fp16, one region of kHeadPrepBytes a head, in the pair table's and the
  // query's regions (contiguous), before the table is built.
  static constexpr int kFusedKvHeads = fast_fused_kv_heads(NT, KB);
  static constexpr int kHeadPrepBytes = kColumns * D * 2;
  static constexpr bool kFusableHeads =
      kAos && D <= kFastFusedMaxHeadDim && NT <= 2 && (TC || kFp8) && kWarps % kFusedKvHeads == 0;
  static_assert(!kFusableHeads || kFusedKvHeads * kHeadPrepBytes <= kLutBytes + kPrepBytes, "the heads' queries fit");
  static_assert(kPrepOffset == kLutOffset + kLutBytes, "the fused heads' query regions");
  static_assert(kAos || kRecordBytes % 4 == 0, "SoA records must allow 4-byte copies");
  static_assert(!TC || (kTensorCopyBoxable && kStageBytes % 128 == 0), "tensor-copy stages");
  static_assert(D % 64 == 0, "D/4 dims per lane must hold whole 3-bit groups and whole words");
  static_assert(NT == 1 || (NT == 2 && D <= 128), "two column tiles only up to D 128 (registers)");
  static_assert(!kKeyWordsInterleaved || kKeyChunk % 4 == 0, "interleaved key words");
  static_assert(!kValueWordsInterleaved || kValueChunk % 4 == 0, "interleaved value words");
};

// T with NT column tiles (and W warps per block, 0: the format's).
template <class T, int NT, int W = 0>
using WithColumnTiles =
    FastTraits<T::kDim, T::kKeyBits, T::kValueBits, T::kLayout, T::kFp8Format, T::kTensorCopy, NT, W>;
// T's format and loader with one column tile and W warps.
template <class T, int W>
using WithWarps = FastTraits<T::kDim, T::kKeyBits, T::kValueBits, T::kLayout, T::kFp8Format, T::kTensorCopy, 1, W>;
// ... and ST pipeline stages.
template <class T, int W, int ST>
using WithWarpsAndStages =
    FastTraits<T::kDim, T::kKeyBits, T::kValueBits, T::kLayout, T::kFp8Format, T::kTensorCopy, 1, W, ST>;

// The power of two the value codes of local dim j carry in their A fragment
// (value_fragment leaves them at their bit position); undone in the epilogue.
template <int VB>
__host__ __device__ constexpr float value_frag_scale(int j) {
  return VB == 4 ? ((j % 2) ? 16.0f : 1.0f) : (j % 3 == 0 ? 1.0f : (j % 3 == 1 ? 8.0f : 64.0f));
}

}  // namespace turboquant::cuda::detail
