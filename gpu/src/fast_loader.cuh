// The fast decode's tile loader: each warp streams its own 16-token tiles
// (tile i of the split goes to warp i % kWarps) into a kStages-deep cp.async
// pipeline of shared-memory stages (FastTraits' stage layout). The copy
// pattern of a lane is fixed for every tile, so it is computed once; the
// cursor (page, slot, block id) advances by kWarps tiles per issue.
//   SoA: the tile's records (kCopyUnit pieces) and its metadata fields.
//   AoS: the 16-byte units that cover each 2-byte aligned slot: DRAM moves
//        32-byte sectors, so the covering units cost no extra traffic, only
//        shared memory. Tiles start at a multiple of 16 slots of a block whose
//        base is 16-byte aligned, so where slot r starts in its units is the
//        same in every tile (aos_slot_in_stage). One copy instruction covers
//        whole spans of two or four rows: with 64-byte pieces of eight rows
//        per instruction (each touching one or two 128-byte lines) k8v4 ran
//        1.44x SoA's time at 16 x 32768, with whole spans 1.08x (H200).
#pragma once

#include <cstdint>

#include "fast_traits.cuh"
#include "mma_utils.cuh"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

// AoS: the byte offset of slot r (0 <= r < kTile) of a tile from the tile's
// first slot of head 0 is head_key_offset(h) + r * token_stride(); its low 4
// bits are where the slot starts in its staged row. Offsets inside a block fit
// in 32 bits (the host sends blocks of 2^31 bytes and more to the strict kernel).
__device__ __forceinline__ int aos_slot_offset(const core::BlockLayout& l, int kv_head, int r) {
  return static_cast<int>(l.head_key_offset(kv_head) + r * l.token_stride());
}
template <class T>
__device__ __forceinline__ int aos_slot_in_stage(const core::BlockLayout& l, int kv_head, int r) {
  return r * T::kRowBytes + (aos_slot_offset(l, kv_head, r) & 15);
}

template <class T>
class FastTileLoader {
  // SoA: the records of a tile are kTile x kUnits pieces of kCopyUnit bytes
  // (piece u = lane + 32 i); lanes 0 .. 2 kMetaFields - 1 copy one 16-byte half
  // of a metadata field each.
  static constexpr int kUnits = T::kRecordBytes / T::kCopyUnit;
  static constexpr int kPieces = (T::kTile * kUnits + 31) / 32;
  static constexpr bool kEvenPieces = 32 % kUnits == 0;  // then piece i is row r0 + i * (32 / kUnits), same column
  // AoS: kAosLanes lanes per row, one unit each (lanes past the row's span
  // idle), kAosRows rows per copy instruction, so that one instruction reads
  // few 128-byte lines. Lane l copies unit l % kAosLanes of rows l / kAosLanes
  // + kAosRows i; rows r and r + 8 share their phase (8 token strides are a
  // multiple of 16), so the lane has kAosClasses source offsets.
  static constexpr int kAosLanes = T::kAosSpanUnits <= 8 ? 8 : (T::kAosSpanUnits <= 16 ? 16 : 32);
  static constexpr int kAosRows = 32 / kAosLanes;
  static constexpr int kAosIssues = T::kTile / kAosRows;
  static constexpr int kAosClasses = 8 / kAosRows;
  static_assert(T::kAosSpanUnits <= 32, "the AoS loader takes slots of up to 483 bytes (one unit per lane)");
  static constexpr int kOffsets = T::kAos ? kAosClasses : (kEvenPieces ? 1 : kPieces);
  static constexpr int kWarpStep = T::kWarps * T::kTile;  // tokens between a warp's tiles

 public:
  // The loader of warp `warp` for the tiles of `range`; my_tiles is the
  // number of tiles this warp issues.
  __device__ __forceinline__ FastTileLoader(const DecodeParams& p, const std::int32_t* block_row,
                                            core::TokenRange range, int kv_head, int warp, int lane, int my_tiles)
      : p_(p), block_row_(block_row), my_tiles_(my_tiles), lane_(lane) {
    const core::BlockLayout l = T::layout(p.layout);
    block_bytes_ = l.block_bytes();  // core's block_base(b) = b * block_bytes(), hoisted out of the issue loop
    record_stride_ = static_cast<int>(l.token_stride());  // between slots of one head
    if (my_tiles > 0) {
      const int tok = range.begin + warp * T::kTile;
      page_ = tok / l.block_size;
      slot_ = tok % l.block_size;
      block_ = block_row[page_];
    }
    if constexpr (T::kAos) {
      const int u = lane % kAosLanes;
      const int r0 = lane / kAosLanes;
      aos_valid_ = 0;
#pragma unroll
      for (int i = 0; i < kAosClasses; ++i) {
        const int slot = aos_slot_offset(l, kv_head, r0 + kAosRows * i);
        piece_src_[i] = (slot & ~15) + 16 * u;
        // The row's span: the units up to the slot's last byte.
        if (16 * u < (slot & 15) + T::kRecordBytes) aos_valid_ |= 1u << i;
      }
      piece_dst_[0] = r0 * T::kRowBytes + 16 * u;
      piece_row_step_ = 8 * record_stride_;
    } else {
#pragma unroll
      for (int i = 0; i < kOffsets; ++i) {
        const int u = lane + 32 * i;
        const int r = u / kUnits;
        const int ch = (u % kUnits) * T::kCopyUnit;
        piece_src_[i] = static_cast<int>(l.key_data_offset(r, kv_head)) + ch;  // from the tile's first slot
        piece_dst_[i] = r * T::kRowBytes + ch;                                 // in the stage
      }
      piece_row_step_ = (kEvenPieces ? 32 / kUnits : 0) * record_stride_;
      // Two lanes per stored metadata field, 16 bytes (8 slots) each.
      if (lane < 2 * T::kMetaFields) meta_src_ = static_cast<int>(l.meta_base(kv_head, lane / 2)) + (lane % 2) * 16;
      meta_dst_ = T::kTile * T::kRowBytes + lane * 16;
    }
  }

  // Issues the copies of the cursor's tile into stage `dst` (the caller
  // commits the group) and advances the cursor to this warp's next tile.
  __device__ __forceinline__ void issue(std::uint8_t* dst) {
    const std::uint8_t* block = p_.cache + block_ * block_bytes_;  // = layout.block_base(block_)
    const std::uint8_t* first = block + slot_ * record_stride_;
    if constexpr (T::kAos) {
#pragma unroll
      for (int i = 0; i < kAosIssues; ++i) {
        const int cls = i % kAosClasses;
        if (aos_valid_ & (1u << cls)) {
          cp_async<16>(dst + piece_dst_[0] + kAosRows * i * T::kRowBytes,
                       first + piece_src_[cls] + (i >= kAosClasses ? piece_row_step_ : 0));
        }
      }
    } else if constexpr (kEvenPieces) {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        cp_async<T::kCopyUnit>(dst + piece_dst_[0] + i * (32 / kUnits) * T::kRowBytes,
                               first + piece_src_[0] + i * piece_row_step_);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        if (T::kTile * kUnits % 32 == 0 || lane_ + 32 * i < T::kTile * kUnits) {
          cp_async<T::kCopyUnit>(dst + piece_dst_[i], first + piece_src_[i]);
        }
      }
    }
    if constexpr (!T::kAos) {
      if (lane_ < 2 * T::kMetaFields) {
        cp_async<16>(dst + meta_dst_, block + meta_src_ + 2 * slot_ /* SoA: meta_token_stride() */);
      }
    }
    ++issued_;
    slot_ += kWarpStep;
    while (slot_ >= p_.layout.block_size) {
      slot_ -= p_.layout.block_size;
      ++page_;
    }
    if (issued_ < my_tiles_) block_ = block_row_[page_];  // used one iteration later
  }

 private:
  const DecodeParams& p_;
  const std::int32_t* block_row_;
  int record_stride_ = 0;
  int my_tiles_;
  int lane_;
  int piece_src_[kOffsets];
  int piece_dst_[kOffsets];
  int piece_row_step_ = 0;
  int meta_src_ = 0;
  int meta_dst_ = 0;
  std::uint32_t aos_valid_ = 0;  // AoS: bit i: this lane's unit lies in the span of its row class i
  int page_ = 0, slot_ = 0, block_ = 0;  // the cursor: the next tile this warp issues
  std::int64_t block_bytes_ = 0;
  int issued_ = 0;
};

}  // namespace turboquant::cuda::detail
