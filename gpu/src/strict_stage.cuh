// Staging of the strict kernels (strict_decode.cuh, strict_split.cuh): where a
// block's query heads and a split's tiles come from, the copy of a tile's
// records into shared-memory rows, the per-token metadata read one tile
// ahead, and the write of a split's partial.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mma_utils.cuh"
#include "params.hpp"
#include "turboquant/core/softmax.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cuda::detail {

// The kind of cache a strict instance reads, fixed at compile time: the layout
// (core::LayoutKind) and the FP8 flavour of its keys (e4m3 for Lloyd-Max keys,
// where it is unused).
// kUniformShift: the host found every slot of each KV head at one 16-byte
// phase (uniform_row_shift), so the instance takes one row shift per warp
// (RowShiftUniform). A separate instance, not a branch in one kernel: with
// both loops in one function ptxas gave the four-head one-warp kernel 168
// registers instead of 128 (PERFORMANCE.md round 21).
template <core::LayoutKind L, core::Fp8Format F8 = core::Fp8Format::kE4m3, bool U = false>
struct CacheKind {
  static constexpr core::LayoutKind kLayout = L;
  static constexpr core::Fp8Format kFp8 = F8;
  static constexpr bool kUniformShift = U;
};

// A staged record (core::Format::record_bytes: SoA the codes of a slot, AoS the
// whole slot) and the row stride.
template <int D, int KB, int VB, class C>
struct StrictRecord {
  static constexpr core::Format kFormat{KB, VB, false, D, C::kLayout, C::kFp8};  // norm_correction: run time
  static constexpr int kKeyBytes = kFormat.key_data_bytes();
  static constexpr int kValueOffset = kFormat.value_record_offset();  // value codes in the record
  static constexpr int kRecordBytes = kFormat.record_bytes();
  static_assert(kFormat.aos() || (kRecordBytes % 8 == 0 && kKeyBytes % 8 == 0),
                "SoA head_dim 64/128/256 records are 8-byte multiples");
  // AoS slots that are not 16-byte multiples (4k + 2 bytes for every
  // Lloyd-Max preset, 4 mod 16 for k8v4) start at varying phases. Their rows
  // keep the alignment of the copies: row byte r holds record byte r - shift.
  // A cache whose base and block bytes are 16-byte multiples (the usual case)
  // is copied in the 16-byte chunks that hold each record, shift = the
  // record's address mod 16, an even number up to 14 (StrictTileSource::
  // stage_chunks). Any other: slots of 4k + 2 bytes in 4-byte words, shift = 0
  // or 2 (kWordPieces, stage_words), the others by the widest copy the
  // alignment allows, shift 0. A row holds the most chunks a record can touch.
  static constexpr bool kShiftedRows = kFormat.aos() && kRecordBytes % 16 != 0;
  static constexpr bool kWordPieces = kShiftedRows && kRecordBytes % 4 == 2;
  static constexpr int kRowChunks = (kRecordBytes + 14 + 15) / 16;
  static constexpr int kRecordWords = kShiftedRows ? 4 * kRowChunks : (kRecordBytes + 3) / 4;
  // Row stride in words: a multiple of 4 (16-byte stores) and 4 mod 8, so the two
  // tokens read at once (rows t, t + 1) land 4+ banks apart; >= 1 word of slack
  // for the two-word bit reads.
  static constexpr int kRow = (kRecordWords + 7) / 8 * 8 + 4;
};

// Bit shift of a staged row (StrictRecord::kShiftedRows): record bit b is row bit
// b + 8 x row_shift_bytes. It travels in the token's staged metadata (.w: the shift
// in bytes, an even number up to 14, nothing else; StrictTileSource::
// stage_meta), so that it is one operand of the address arithmetic. Rows past
// a tile's end are staged with zero metadata (their scores are computed and
// never used): every row's shift stays inside it.
__device__ __forceinline__ int row_shift_bytes(const float4& meta) { return static_cast<int>(__float_as_uint(meta.w)); }

// Where the tile phases take a staged row's shift from: the row's own
// metadata (RowShiftPerRow), one shift for every row of the warp
// (RowShiftUniform: all slots of the KV heads at one 16-byte phase by
// uniform_row_shift, the CacheKind::kUniformShift instances), or none (rows that are not
// shifted). A uniform shift is a loop invariant, so the phases' row and field
// addresses are set up once instead of once per row and token. Both give the
// same shift for a row: the choice never changes a bit.
struct RowShiftPerRow {
  __device__ __forceinline__ int bytes(const float4& meta) const { return row_shift_bytes(meta); }
  __device__ __forceinline__ int bits(const float4& meta) const { return 8 * bytes(meta); }
};
struct RowShiftUniform {
  int shift_bytes;
  __device__ __forceinline__ int bytes(const float4&) const { return shift_bytes; }
  __device__ __forceinline__ int bits(const float4&) const { return 8 * shift_bytes; }
};
struct RowShiftNone {
  __device__ __forceinline__ int bytes(const float4&) const { return 0; }
  __device__ __forceinline__ int bits(const float4&) const { return 0; }
};

// Whether shifted rows (StrictRecord::kShiftedRows formats) are staged by
// 16-byte chunks: the cache base and the block bytes are 16-byte multiples, so
// a slot's 16-byte phase is its offset's in the block. Else by words.
__host__ __device__ inline bool chunked_copies(const void* cache, const core::BlockLayout& l) {
  return ((reinterpret_cast<std::uintptr_t>(cache) | static_cast<std::uint64_t>(l.block_bytes())) & 15) == 0;
}

// Whether the slots of every KV head of a cache share their 16-byte phase
// (StrictRecord::kShiftedRows formats): chunked copies and a token stride of
// whole 16-byte units, e.g. vLLM's 4bit_nc, k3v4_nc and 3bit_nc caches with 8
// KV heads, k8v4 with 4 or 8. The host picks the CacheKind::kUniformShift
// instance by it.
__host__ __device__ inline bool uniform_row_shift(const void* cache, const core::BlockLayout& l) {
  return chunked_copies(cache, l) && l.token_stride() % 16 == 0;
}

// The row-shift policy of an instance (Rec: StrictRecord; C: CacheKind).
template <class Rec, class C>
using RowShiftOf = std::conditional_t<!Rec::kShiftedRows, RowShiftNone,
                                      std::conditional_t<C::kUniformShift, RowShiftUniform, RowShiftPerRow>>;

// The query heads of a block of either strict kernel: grid (splits, Hk x
// chunks, batch), chunk `chunk` of H heads of KV head kv_head's group.
template <int H>
struct StrictBlockHeads {
  int kv_head;
  int b;                   // query row (blockIdx.z; its sequence: query_row)
  int heads;               // query heads of this block (<= H)
  std::int64_t first_row;  // (query row, head) row (b, kv_head * group + chunk * H) of head 0
  __device__ __forceinline__ explicit StrictBlockHeads(const DecodeParams& p)
      : kv_head(blockIdx.y / p.chunks_per_kv_head), b(blockIdx.z) {
    const int first_head = (blockIdx.y % p.chunks_per_kv_head) * H;
    heads = min(H, p.group - first_head);
    first_row = std::int64_t{b} * p.num_q_heads + (kv_head * p.group + first_head);
  }
};

// `kBits` (<= 32) bits of a staged row starting at bit `pos` (two words when
// they may straddle a word boundary; kStraddles: always, for shifted rows).
template <int kBits, bool kStraddles = false>
__device__ __forceinline__ std::uint32_t row_bits(const std::uint32_t* row, int pos) {
  const int w = pos >> 5;
  const int sh = pos & 31;
  if constexpr (32 % kBits == 0 && !kStraddles) {
    return row[w] >> sh;  // aligned fields never straddle
  } else {
    return __funnelshift_r(row[w], row[w + 1], sh);
  }
}

// The warp's share of n records' `per` copies each, in lane order:
// fn(t, k, src) for copy k of token t, src lane t's record pointer (every lane
// takes part in the shuffles).
template <class F>
__device__ __forceinline__ void for_each_record_copy(const std::uint8_t* rec, int n, int per, int lane, F&& fn) {
  const int total = n * per;
  for (int base = 0; base < total; base += 32) {
    const int c = base + lane;
    const int t = min(c / per, core::kTileTokens - 1);
    const auto* src = reinterpret_cast<const std::uint8_t*>(
        __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(rec), t));
    if (c < total) fn(t, c - t * per, src);
  }
}

// Copies the n records of a tile into the warp's rows: cp.async of V bytes
// (V = 16, 8, 4; completes at the caller's cp_async_wait), or synchronous
// 2-byte copies for caches aligned to 2 bytes only.
template <int V, int W>
__device__ __forceinline__ void stage_records(std::uint32_t (*raw)[W], const std::uint8_t* rec, int n, int lane,
                                              int bytes_per_record) {
  using T = std::conditional_t<V == 16, uint4, std::conditional_t<V == 8, uint2, std::conditional_t<V == 4, std::uint32_t, std::uint16_t>>>;
  for_each_record_copy(rec, n, bytes_per_record / V, lane, [&](int t, int k, const std::uint8_t* src) {
    if constexpr (V == 2) {
      reinterpret_cast<T*>(raw[t])[k] = reinterpret_cast<const T*>(src)[k];
    } else {
      cp_async<V>(reinterpret_cast<T*>(raw[t]) + k, reinterpret_cast<const T*>(src) + k);
    }
  });
}

// Where the tiles of one split come from, for a warp of either strict kernel:
// lane tl = lane & 15 owns token tile_start + tl for block ids, record
// addresses and fp16 metadata (lanes 16..31 of the metadata read nothing).
template <class Rec>
struct StrictTileSource {
  const DecodeParams& p;
  const std::int32_t* block_row;
  core::TokenRange range;
  int kv_head;
  int lane;
  int vec;       // the widest copy the alignment allows: 16, 8, 4 or 2 bytes (rows staged at shift 0)
  bool chunked;  // chunked_copies: shifted rows by 16-byte chunks (StrictRecord), else by words

  __device__ StrictTileSource(const DecodeParams& params, int b, core::TokenRange r, int head, int lane_id)
      : p(params), block_row(params.block_table + std::int64_t{b} * params.max_blocks_per_seq), range(r),
        kv_head(head), lane(lane_id) {
    const std::uint64_t align = reinterpret_cast<std::uintptr_t>(p.cache) |
                                static_cast<std::uint64_t>(p.layout.block_bytes()) | Rec::kRecordBytes;
    vec = (align & 15) == 0 ? 16 : (align & 7) == 0 ? 8 : (align & 3) == 0 ? 4 : 2;
    chunked = chunked_copies(p.cache, p.layout);
  }
  // p.layout with the layout kind as a constant, so that the compiler folds
  // BlockLayout's layout branches: AoS (ptxas, D 128) 145 instead of 182
  // registers in the one-warp kernel, 80 instead of 128 in the split kernel;
  // SoA back to its code before the AoS layout existed (the run-time branches
  // cost its large-batch decode 2.5-4% on the H200), at the price of 12 bytes
  // of spill in one SoA split-kernel instance (D 128, K4V4, 2 heads).
  __device__ core::BlockLayout layout() const {
    core::BlockLayout l = p.layout;
    l.format.layout = Rec::kFormat.layout;
    return l;
  }
  // The tile phases' row-shift policy for the instance's CacheKind C: in a
  // kUniformShift instance (uniform_row_shift held on the host) every staged
  // row's shift is the phase of the KV head's offset in the block (base and
  // block bytes are 16-byte multiples there).
  template <class C>
  __device__ RowShiftOf<Rec, C> row_shift() const {
    if constexpr (std::is_same_v<RowShiftOf<Rec, C>, RowShiftUniform>) {
      return RowShiftUniform{static_cast<int>(layout().head_key_offset(kv_head) & 14)};
    } else {
      return {};
    }
  }
  __device__ int token(int tile_start) const { return tile_start + (lane & 15); }
  // Token t (>= 0) of the sequence: its page of the block table and its slot in
  // that block, by the launch's FastDivisor (three divisions a tile were about
  // 75 of the strict kernel's ~2,100 instructions per tile and warp).
  __device__ int page_of(int t) const { return static_cast<int>(p.block_size_div.div(static_cast<std::uint32_t>(t))); }
  __device__ int slot_of(int t) const { return t - page_of(t) * p.layout.block_size; }
  __device__ int block_of(int tile_start) const {
    const int t = token(tile_start);
    return t < range.end ? block_row[page_of(t)] : 0;
  }
  __device__ const std::uint8_t* record_of(int tile_start, int blk) const {
    const int t = token(tile_start);
    if (t >= range.end) return nullptr;
    const core::BlockLayout& l = layout();
    return p.cache + l.block_base(blk) + l.key_data_offset(slot_of(t), kv_head);
  }
  // (value scale, value zero, stored key norm, w) of the lane's token; w is 0,
  // or for shifted rows the row's shift in bytes (bits 0..3) and, when copied
  // by words, bit 4 set and the 2 record bytes the words leave out (bits
  // 16..31; stage_meta).
  __device__ float4 meta_of(int tile_start, int blk) const {
    const int t = token(tile_start);
    if (lane >= 16 || t >= range.end) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const core::BlockLayout& l = layout();
    const std::uint8_t* block = p.cache + l.block_base(blk);
    const int slot = slot_of(t);
    float w = 0.0f;
    if constexpr (Rec::kShiftedRows) {
      const std::uint8_t* rec = block + l.key_data_offset(slot, kv_head);
      const auto address = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(rec));
      if (chunked) {
        w = __uint_as_float(address & 14u);
      } else if constexpr (Rec::kWordPieces) {
        const std::uint32_t shift = address & 2u;
        const std::uint16_t piece = *reinterpret_cast<const std::uint16_t*>(rec + (shift ? 0 : Rec::kRecordBytes - 2));
        w = __uint_as_float(shift | 16u | static_cast<std::uint32_t>(piece) << 16);
      }
    }
    return make_float4(core::read_meta(l, block, slot, kv_head, core::MetaField::kValueScale),
                       core::read_meta(l, block, slot, kv_head, core::MetaField::kValueZero),
                       core::read_key_norm(l, block, slot, kv_head), w);
  }
  // Stages the lane's token (meta_of's value) beside its row: the metadata the
  // tile phases read (.w reduced to the row's shift in bytes, row_shift_bytes)
  // and, for shifted rows copied by words, the 2 bytes stage_words left out
  // (the record's head at row bytes 2..3 when shift = 2, else its tail).
  __device__ static void stage_meta(float4& staged, std::uint32_t* row, const float4& meta) {
    const std::uint32_t w = __float_as_uint(meta.w);
    staged = make_float4(meta.x, meta.y, meta.z, __uint_as_float(w & 14u));
    if constexpr (Rec::kWordPieces) {
      if (w & 16u) {
        reinterpret_cast<std::uint16_t*>(row)[(w & 2u) ? 1 : (Rec::kRecordBytes - 2) / 2] = static_cast<std::uint16_t>(w >> 16);
      }
    }
  }
  // Copies the n records starting at rec (lane t's pointer) into rows.
  template <int W>
  __device__ void stage(std::uint32_t (*rows)[W], const std::uint8_t* rec, int n) const {
    if constexpr (Rec::kShiftedRows) {
      if (chunked) return stage_chunks(rows, rec, n);
      if constexpr (Rec::kWordPieces) return stage_words(rows, rec, n);
    }
    switch (vec) {
      case 16: stage_records<16>(rows, rec, n, lane, Rec::kRecordBytes); break;
      case 8: stage_records<8>(rows, rec, n, lane, Rec::kRecordBytes); break;
      case 4: stage_records<4>(rows, rec, n, lane, Rec::kRecordBytes); break;
      default: stage_records<2>(rows, rec, n, lane, Rec::kRecordBytes); break;
    }
  }
  // Shifted rows of a cache whose base and block bytes are 16-byte multiples:
  // the 16-byte chunks that hold each record, whole (up to kRowChunks per row;
  // a record at address a takes (a mod 16 + record bytes) / 16 rounded up), so
  // that row byte r holds record byte r - a mod 16. The chunks stay inside the
  // cache, whose end is a 16-byte multiple too; their bytes of neighbouring
  // slots are never read.
  template <int W>
  __device__ void stage_chunks(std::uint32_t (*rows)[W], const std::uint8_t* rec, int n) const {
    static_assert(W % 4 == 0 && 4 * Rec::kRowChunks <= W, "rows of whole 16-byte chunks");
    for_each_record_copy(rec, n, Rec::kRowChunks, lane, [&](int t, int k, const std::uint8_t* src) {
      const auto a = reinterpret_cast<std::uintptr_t>(src);
      if (k < static_cast<int>(((a & 15u) + Rec::kRecordBytes + 15) >> 4)) {
        cp_async<16>(reinterpret_cast<uint4*>(rows[t]) + k, reinterpret_cast<const uint4*>(a & ~std::uintptr_t{15}) + k);
      }
    });
  }
  // Shifted rows (records of 4k + 2 bytes at even addresses): the k whole
  // 4-byte words of each record by cp.async of 4 bytes, into the row words of
  // the same 4-byte alignment (a record at 2 mod 4 lands from row byte 2). The
  // 2 bytes outside the words come with the metadata (stage_meta): 16 copies
  // of 2 bytes here would each wait for their load.
  template <int W>
  __device__ void stage_words(std::uint32_t (*rows)[W], const std::uint8_t* rec, int n) const {
    for_each_record_copy(rec, n, Rec::kRecordBytes / 4, lane, [&](int t, int w, const std::uint8_t* src) {
      const int head = static_cast<int>(reinterpret_cast<std::uintptr_t>(src) & 2u);  // 0 or 2
      cp_async<4>(&rows[t][w + head / 2], src + head + 4 * w);
    });
  }
};

// The split's partial: acc[g][e] at dims first_dim + e of head g < heads, and
// (when `writes_ml`, for lane g < heads) head g's softmax state. Lets the
// merge grid start launching first (it waits for this grid).
template <int D, int H, int E>
__device__ __forceinline__ void strict_write_partial(const DecodeParams& p, const StrictBlockHeads<H>& blk, int split,
                                                     const float (&acc)[H][E], int first_dim,
                                                     const core::SoftmaxState& state, bool writes_ml, int lane) {
  pdl_launch_dependents();
  const core::PartialLayout pl = p.partials(D);
  const std::int64_t acc0 = pl.acc_offset(blk.first_row, split);  // head 0; head g is g rows on
#pragma unroll
  for (int g = 0; g < H; ++g) {
    if (g < blk.heads) {
      float* dst = p.partial_acc + acc0 + g * pl.acc_row_stride() + first_dim;
      if constexpr (E % 2 == 0) {
#pragma unroll
        for (int e = 0; e < E; e += 2) *reinterpret_cast<float2*>(dst + e) = make_float2(acc[g][e], acc[g][e + 1]);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) dst[e] = acc[g][e];
      }
    }
  }
  if (writes_ml && lane < blk.heads) {
    float* ml = p.partial_ml + pl.ml_offset(blk.first_row, split) + pl.ml_offset(lane, 0);
    ml[0] = state.max;
    ml[1] = state.sum;
  }
}

}  // namespace turboquant::cuda::detail
