// Walking one work item's tokens tile by tile through the block table: the
// addresses of each token's records, the tile's fp16 metadata widened to fp32,
// and software prefetch, for both layouts (SoA: a tile's metadata field is
// consecutive fp16 values; AoS: it sits inside each token's record).
// Templated on the arch (never shared between ISA translation units). Offsets
// come from core::BlockLayout only.
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>

#include "isa_traits.hpp"
#include "kernels.hpp"
#include "turboquant/core/split_plan.hpp"

namespace turboquant::cpu::simd {

inline constexpr int kTile = core::kTileTokens;

// The records of up to 16 consecutive tokens of one KV head.
struct TileRecords {
  int n = 0;
  const std::uint8_t* key[kTile];  // records; the value codes start at + format.value_record_offset()
  bool one_block = false;          // all n tokens in `block`, slots slot..slot+n-1
  const std::uint8_t* block = nullptr;
  int slot = 0;
  const std::uint8_t* blocks[kTile];  // per token when !one_block
  int slots[kTile];
};

template <class A>
class TileWalker {
 public:
  using S = Isa<A>;
  using F = typename S::F;

  TileWalker(const DecodeProblem& p, int b, int h, core::TokenRange range)
      : p_(p),
        l_(p.layout),
        block_row_(p.block_row(b)),
        rec_stride_(l_.token_stride()),
        key_off_(l_.head_key_offset(h)),
        token_(range.begin),
        end_(range.end),
        blk_(range.begin / l_.block_size),
        slot_(range.begin % l_.block_size),
        block_(p.cache + l_.block_base(block_row_[blk_])) {
    meta_off_[0] = l_.format.fp8_keys() ? -1 : l_.meta_field_base(h, core::MetaField::kKeyNorm);
    meta_off_[1] = l_.meta_field_base(h, core::MetaField::kValueScale);
    meta_off_[2] = l_.meta_field_base(h, core::MetaField::kValueZero);
    for (int m = 0; m < 3; ++m) in_record_[m] = meta_off_[m] - key_off_;  // AoS: the field's place in a record
    assert(!l_.aos() || in_record_[2] == in_record_[1] + 2);  // meta()'s one read of scale and zero
  }

  // The next tile (n = 0 after the last), its records and metadata prefetched
  // into L2: a head's records are Hk records apart in blocks the table
  // scatters, which the hardware prefetchers do not follow.
  void next(TileRecords& t) {
    t.n = end_ - token_ < kTile ? end_ - token_ : kTile;
    if (t.n <= 0) {
      t.n = 0;
      return;
    }
    const int bs = l_.block_size;
    t.one_block = slot_ + t.n <= bs;
    t.block = block_;
    t.slot = slot_;
    for (int i = 0; i < t.n; ++i) {
      const std::uint8_t* rec = block_ + key_off_ + slot_ * rec_stride_;  // key_data_offset(slot_, h)
      t.key[i] = rec;
      prefetch_record<_MM_HINT_T1>(rec);
      if (!t.one_block) {
        t.blocks[i] = block_;
        t.slots[i] = slot_;
      }
      if (!l_.aos() && (i == 0 || slot_ == 0)) prefetch_meta(block_, slot_);  // AoS: in the record
      if (++slot_ == bs && token_ + i + 1 < end_) {
        slot_ = 0;
        block_ = p_.cache + l_.block_base(block_row_[++blk_]);
      }
    }
    token_ += t.n;
  }

  // The tile's metadata as fp32, lanes >= n 0: with kNorms the key norms
  // (Lloyd-Max keys), and the value scales and zeros. SoA: the fields of
  // consecutive slots are meta_token_stride() = 2 bytes apart, one fp16 vector
  // per field. AoS: one fp16 of each field in each record, the value zero right
  // after the scale, so that one 4-byte read per record gives both
  // (Isa::record_halves).
  template <bool kNorms>
  void meta(const TileRecords& t, F* norms, F* scales, F* zeros) const {
    if (l_.aos()) {
      if constexpr (kNorms) S::record_halves(t.key, t.n, in_record_[0], norms, nullptr);
      S::record_halves(t.key, t.n, in_record_[1], scales, zeros);
      return;
    }
    if constexpr (kNorms) soa_field(t, 0, norms);
    soa_field(t, 1, scales);
    soa_field(t, 2, zeros);
  }

  // Every line of a record. (Helpers around the prefetch must be inlined
  // early: GCC deduces a function holding only prefetches to be const and
  // deletes calls to it.)
  template <int Hint>
  [[gnu::always_inline]] void prefetch_record(const std::uint8_t* rec) const {
    const auto first = reinterpret_cast<std::uintptr_t>(rec) & ~std::uintptr_t{63};
    const auto last = reinterpret_cast<std::uintptr_t>(rec + l_.format.record_bytes() - 1);
    for (std::uintptr_t line = first; line <= last; line += 64) {
      prefetch<Hint>(reinterpret_cast<const std::uint8_t*>(line));
    }
  }

 private:
  // SoA metadata field m (0 key norm, 1 value scale, 2 value zero) of the tile.
  void soa_field(const TileRecords& t, int m, F* out) const {
    if (t.one_block && t.n == kTile) {
      S::half16(reinterpret_cast<const std::uint16_t*>(meta_at(t.block, m, t.slot)), out);
      return;
    }
    alignas(32) std::uint16_t h[kTile] = {};
    if (t.one_block) {
      std::memcpy(h, meta_at(t.block, m, t.slot), 2 * static_cast<std::size_t>(t.n));
    } else {
      for (int i = 0; i < t.n; ++i) std::memcpy(&h[i], meta_at(t.blocks[i], m, t.slots[i]), 2);
    }
    S::half16(h, out);
  }
  // Metadata field m of `slot` in `block`.
  [[gnu::always_inline]] const std::uint8_t* meta_at(const std::uint8_t* block, int m, int slot) const {
    return block + meta_off_[m] + l_.meta_token_stride() * slot;
  }
  template <int Hint>
  [[gnu::always_inline]] static void prefetch(const std::uint8_t* a) {
    // What _mm_prefetch(a, Hint) expands to in GCC and clang alike (bit 2 of
    // an _MM_HINT_* value: prefetch for write; bits 0-1: the locality, 2 =
    // _MM_HINT_T1 = prefetcht1), spelled without GCC's `_mm_hint` enum, which
    // clang does not have (docs/RELIABILITY.md, finding F8).
    static_assert(Hint >= 0 && Hint <= 7, "an _MM_HINT_* value");
    __builtin_prefetch(a, (Hint >> 2) & 1, Hint & 3);
  }
  // The metadata of `slot` and the following slots of the tile.
  [[gnu::always_inline]] void prefetch_meta(const std::uint8_t* block, int slot) const {
    const int last = slot + kTile - 1 < l_.block_size ? slot + kTile - 1 : l_.block_size - 1;
    for (int m = 0; m < 3; ++m) {
      if (meta_off_[m] < 0) continue;
      prefetch<_MM_HINT_T1>(meta_at(block, m, slot));
      prefetch<_MM_HINT_T1>(meta_at(block, m, last));
    }
  }

  const DecodeProblem& p_;
  const core::BlockLayout& l_;
  const std::int32_t* block_row_;
  std::int64_t rec_stride_;
  std::int64_t key_off_;
  std::int64_t meta_off_[3];
  std::int64_t in_record_[3];
  int token_;  // next token to walk
  int end_;
  int blk_;
  int slot_;
  const std::uint8_t* block_;
};

}  // namespace turboquant::cpu::simd
