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

// A staged record: the format's sizes (core::Format) and the row stride.
template <int D, int KB, int VB>
struct StrictRecord {
  static constexpr core::Format kFormat = core::make_format(D, KB, VB);
  static constexpr int kKeyBytes = kFormat.key_data_bytes();
  static constexpr int kRecordBytes = kFormat.data_bytes();
  static_assert(kRecordBytes % 8 == 0 && kKeyBytes % 8 == 0, "head_dim 64/128/256 records are 8-byte multiples");
  static constexpr int kRecordWords = kRecordBytes / 4;
  // Row stride in words: a multiple of 4 (16-byte stores) and 4 mod 8, so the two
  // tokens read at once (rows t, t + 1) land 4+ banks apart; >= 1 word of slack
  // for the two-word bit reads.
  static constexpr int kRow = (kRecordWords + 7) / 8 * 8 + 4;
};

// The query heads of a block of either strict kernel: grid (splits, Hk x
// chunks, batch), chunk `chunk` of H heads of KV head kv_head's group.
template <int H>
struct StrictBlockHeads {
  int kv_head;
  int b;                   // sequence
  int heads;               // query heads of this block (<= H)
  std::int64_t first_row;  // query row (b, kv_head * group + chunk * H) of head 0
  __device__ __forceinline__ explicit StrictBlockHeads(const DecodeParams& p)
      : kv_head(blockIdx.y / p.chunks_per_kv_head), b(blockIdx.z) {
    const int first_head = (blockIdx.y % p.chunks_per_kv_head) * H;
    heads = min(H, p.group - first_head);
    first_row = std::int64_t{b} * p.num_q_heads + (kv_head * p.group + first_head);
  }
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
                       core::read_key_norm(l, block, slot, kv_head), 0.0f);
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
