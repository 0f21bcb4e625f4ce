// The fast decode's tile loader: each warp streams its own 16-token tiles
// (WarpTiles: tile i of the split goes to warp i % kWarps, or, in a block of
// fused heads, to the warps of each KV head in turn) into
// a kStages-deep cp.async pipeline of shared-memory stages (FastTraits' stage
// layout). The copy pattern of a lane is fixed for every tile, so it is
// computed once; the cursor (page, slot, block id) advances by the warp's
// step per issue.
//   SoA: the tile's records (kCopyUnit pieces) and its metadata fields.
//   AoS: the 16-byte units that cover each 2-byte aligned slot: DRAM moves
//        32-byte sectors, so the covering units cost no extra traffic, only
//        shared memory. Tiles start at a multiple of 16 slots of a block whose
//        base is 16-byte aligned, so where slot r starts in its units is the
//        same in every tile (aos_slot_in_stage). One copy instruction covers
//        whole spans of two or four rows: with 64-byte pieces of eight rows
//        per instruction (each touching one or two 128-byte lines) k8v4 ran
//        1.44x SoA's time at 16 x 32768, with whole spans 1.08x (H200).
// FastTensorLoader, for layouts with tensor_copy_fits: one lane issues the
// tile's tensor copies (tensor_box.hpp) into the rows (and SoA metadata) the
// cp.async loader would fill; they complete on the stage's barrier.
// Both loaders have the same protocol: issue(stage) per tile in tile order,
// commit() after each issue slot, wait() before reading the oldest tile,
// drain() at the end.
#pragma once

#include <cstdint>

#include "fast_traits.cuh"
#include "mma_utils.cuh"
#include "tensor_copy.cuh"
#include "tensor_maps.hpp"
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

// The next tile a warp issues (tiles `step` tokens apart): its page of the
// block table, its first slot in that block and the block's id (host and
// device: tests/gpu/test_fast_cursor.cu checks it on the host).
struct FastTileCursor {
  const std::int32_t* block_row;
  int block_size;
  int my_tiles;
  int step_pages, step_slots;  // step / block_size, step % block_size
  int page = 0, slot = 0, block = 0;
  int issued = 0;

  TQ_HD FastTileCursor(const std::int32_t* row, int block_size_, int first_token, int step, int my_tiles_)
      : block_row(row), block_size(block_size_), my_tiles(my_tiles_), step_pages(step / block_size_),
        step_slots(step % block_size_) {
    if (my_tiles > 0) {
      page = first_token / block_size;
      slot = first_token % block_size;
      block = block_row[page];
    }
  }
  // Constant time: a loop over the blocks a step skips (8 to 12 iterations a
  // tile at block size 16) took 12% of the two-tile kernel's stall samples
  // (PERFORMANCE.md round 17).
  TQ_HD void advance() {
    ++issued;
    page += step_pages;
    slot += step_slots;
    if (slot >= block_size) {
      slot -= block_size;
      ++page;
    }
    if (issued < my_tiles) block = block_row[page];  // used one iteration later
  }
};

// The 16-token tiles of a split one warp streams: tile `index` of the split
// and every `warps`-th tile after it.
struct WarpTiles {
  int first;  // first token of the warp's first tile
  int step;   // tokens between the warp's tiles
  int count;  // the warp's tiles
};
TQ_HD constexpr WarpTiles warp_tiles(core::TokenRange range, int tile, int index, int warps) {
  const int num_tiles = (range.size() + tile - 1) / tile;
  return WarpTiles{range.begin + index * tile, warps * tile,
                   num_tiles > index ? (num_tiles - index + warps - 1) / warps : 0};
}
static_assert(warp_tiles(core::TokenRange{64, 200}, 16, 3, 8).count == 1 &&
              warp_tiles(core::TokenRange{64, 200}, 16, 0, 8).count == 2 &&
              warp_tiles(core::TokenRange{64, 200}, 16, 0, 1).count == 9 &&
              warp_tiles(core::TokenRange{64, 200}, 16, 2, 8).first == 96);

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

 public:
  // The loader of a warp's tiles of KV head kv_head.
  __device__ __forceinline__ FastTileLoader(const DecodeParams& p, const std::int32_t* block_row, WarpTiles tiles,
                                            int kv_head, int lane)
      : p_(p), cursor_(block_row, p.layout.block_size, tiles.first, tiles.step, tiles.count), lane_(lane) {
    const core::BlockLayout l = T::layout(p.layout);
    block_bytes_ = l.block_bytes();  // core's block_base(b) = b * block_bytes(), hoisted out of the issue loop
    record_stride_ = static_cast<int>(l.token_stride());  // between slots of one head
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
    const std::uint8_t* block = p_.cache + cursor_.block * block_bytes_;  // = layout.block_base(cursor_.block)
    const std::uint8_t* first = block + cursor_.slot * record_stride_;
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
        cp_async<16>(dst + meta_dst_, block + meta_src_ + 2 * cursor_.slot /* SoA: meta_token_stride() */);
      }
    }
    cursor_.advance();
  }
  __device__ __forceinline__ void commit() { cp_async_commit(); }
  // The oldest issued tile has landed (kStages - 2 younger ones may be in flight).
  __device__ __forceinline__ void wait() { cp_async_wait<T::kStages - 2>(); }
  __device__ __forceinline__ void drain() { cp_async_wait<0>(); }

 private:
  const DecodeParams& p_;
  FastTileCursor cursor_;
  int record_stride_ = 0;
  int lane_;
  int piece_src_[kOffsets];
  int piece_dst_[kOffsets];
  int piece_row_step_ = 0;
  int meta_src_ = 0;
  int meta_dst_ = 0;
  std::uint32_t aos_valid_ = 0;  // AoS: bit i: this lane's unit lies in the span of its row class i
  std::int64_t block_bytes_ = 0;
};

// Tiles by tensor copies (T::kTensorCopy): lane 0 of the warp issues the
// boxes of a tile (records: x the head's record (SoA) or the 16-byte unit of
// its slot (AoS) in a position, y the tile's first slot, z the block; SoA
// metadata: x the tile's first field bytes, y the head's first field row);
// tile n completes on barrier n % kStages of the warp, whose use n / kStages
// has parity (n / kStages) & 1.
template <class T>
class FastTensorLoader {
  static_assert(T::kTensorCopy, "FastTensorLoader stages tensor-copy tiles");

 public:
  // `bars`: kStages barriers of this warp in shared memory (initialized here).
  __device__ __forceinline__ FastTensorLoader(const DecodeParams& p, const FastTensorMaps* maps,
                                              const std::int32_t* block_row, WarpTiles tiles, int kv_head, int lane,
                                              std::uint64_t* bars)
      : maps_(maps), cursor_(block_row, p.layout.block_size, tiles.first, tiles.step, tiles.count),
        bars_(bars), leader_(lane == 0) {
    const core::BlockLayout l = T::layout(p.layout);
    box_x_ = static_cast<int>(l.head_key_offset(kv_head)) & ~15;  // SoA: already a multiple of 16
    meta_row_ = kv_head * T::kMetaFields;
    if (leader_) {
#pragma unroll
      for (int s = 0; s < T::kStages; ++s) barrier_init(bars_ + s, 1);
      barrier_init_fence();
    }
    __syncwarp();
  }

  __device__ __forceinline__ void issue(std::uint8_t* dst) {
    if (leader_) {
      std::uint64_t* bar = bars_ + cursor_.issued % T::kStages;
      barrier_arrive_expect_bytes(bar, T::kTileBytes);
      tensor_copy_3d(dst, &maps_->tiles, box_x_, cursor_.slot, cursor_.block, bar);
      if constexpr (!T::kAos) {
        tensor_copy_3d(dst + T::kTile * T::kRowBytes, &maps_->meta, 2 * cursor_.slot, meta_row_, cursor_.block, bar);
      }
    }
    cursor_.advance();
  }
  __device__ __forceinline__ void commit() {}
  __device__ __forceinline__ void wait() {
    barrier_wait(bars_ + waited_ % T::kStages, (waited_ / T::kStages) & 1);
    ++waited_;
  }
  __device__ __forceinline__ void drain() {}  // every issued tile was waited for

 private:
  const FastTensorMaps* maps_;
  FastTileCursor cursor_;
  std::uint64_t* bars_;
  bool leader_;
  int box_x_ = 0;
  int meta_row_ = 0;
  int waited_ = 0;
};

// Issues the first kStages - 1 tiles of a warp (committing a group per stage,
// issued or not, as the protocol wants); returns the stage of the next issue.
template <class T, class Loader>
__device__ __forceinline__ std::uint8_t* issue_first_stages(Loader& loader, std::uint8_t* stages, int my_tiles) {
  std::uint8_t* issue_stage = stages;
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < my_tiles) loader.issue(issue_stage);
    loader.commit();
    issue_stage += T::kStageBytes;
  }
  return issue_stage;
}

}  // namespace turboquant::cuda::detail
