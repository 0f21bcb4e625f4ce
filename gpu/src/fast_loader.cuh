// The fast decode's tile loader: each warp streams its own 16-token tiles
// (tile i of the split goes to warp i % kWarps) into a kStages-deep cp.async
// pipeline of shared-memory stages (FastTraits' stage layout). The copy
// pattern of a lane is fixed for every tile, so it is computed once; the
// cursor (page, slot, block id) advances by kWarps tiles per issue.
#pragma once

#include <cstdint>

#include "fast_traits.cuh"
#include "mma_utils.cuh"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cuda::detail {

template <int D, int KB, int VB>
class FastTileLoader {
  using T = FastTraits<D, KB, VB>;
  // The records of a tile are kTile x kUnits pieces of kCopyUnit bytes (piece
  // u = lane + 32 i); lanes 0 .. 2 kMetaFields - 1 copy one 16-byte half of a
  // metadata field each.
  static constexpr int kUnits = T::kRecordBytes / T::kCopyUnit;
  static constexpr int kPieces = (T::kTile * kUnits + 31) / 32;
  static constexpr bool kEvenPieces = 32 % kUnits == 0;  // then piece i is row r0 + i * (32 / kUnits), same column
  static constexpr int kOffsets = kEvenPieces ? 1 : kPieces;
  static constexpr int kWarpStep = T::kWarps * T::kTile;  // tokens between a warp's tiles

 public:
  // The loader of warp `warp` for the tiles of `range`; my_tiles is the
  // number of tiles this warp issues.
  __device__ __forceinline__ FastTileLoader(const DecodeParams& p, const std::int32_t* block_row,
                                            core::TokenRange range, int kv_head, int warp, int lane, int my_tiles)
      : p_(p), block_row_(block_row), my_tiles_(my_tiles), lane_(lane) {
    const core::BlockLayout l = T::layout(p.layout);
    block_bytes_ = l.block_bytes();  // core's block_base(b) = b * block_bytes(), hoisted out of the issue loop
    // Offsets inside a block fit in 32 bits (the host sends blocks of 2^31
    // bytes and more to the strict kernel).
    record_stride_ = static_cast<int>(l.token_stride());  // between slots of one head
    if (my_tiles > 0) {
      const int tok = range.begin + warp * T::kTile;
      page_ = tok / l.block_size;
      slot_ = tok % l.block_size;
      block_ = block_row[page_];
    }
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

  // Issues the copies of the cursor's tile into stage `dst` (the caller
  // commits the group) and advances the cursor to this warp's next tile.
  __device__ __forceinline__ void issue(std::uint8_t* dst) {
    const std::uint8_t* block = p_.cache + block_ * block_bytes_;  // = layout.block_base(block_)
    const std::uint8_t* first = block + slot_ * record_stride_;
    if constexpr (kEvenPieces) {
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
    if (lane_ < 2 * T::kMetaFields) {
      cp_async<16>(dst + meta_dst_, block + meta_src_ + 2 * slot_  /* SoA: meta_token_stride() */);
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
  int page_ = 0, slot_ = 0, block_ = 0;  // the cursor: the next tile this warp issues
  std::int64_t block_bytes_ = 0;
  int issued_ = 0;
};

}  // namespace turboquant::cuda::detail
