// The dequantize's code arrays in the registers of the group of D/32 lanes
// that dequantizes one record (dequantize.cuh): each lane loads its 32-dim
// chunk of a packed code array (CodeChunk), and a transpose through shuffles
// gives every lane its runs of the contract's layout (CodeRuns,
// group_contract.cuh), which the rest of the kernel's arithmetic reads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "byte_stores.cuh"     // address_of
#include "group_contract.cuh"  // RecordGroup
#include "mma_utils.cuh"       // load_chunk, shifted_bits

namespace turboquant::cuda::detail {

inline constexpr unsigned kFullWarp = 0xffffffffu;

// kBytes bytes (a multiple of 4) at `p`, 2 bytes past a word boundary: a
// 2-byte load, the kBytes / 4 - 1 whole words between, a 2-byte load, then
// each word funnel-shifted from two neighbours (kBytes / 4 + 1 loads instead
// of kBytes / 2, none touching a byte outside the chunk).
template <int kBytes>
__device__ __forceinline__ void load_half_shifted(const std::uint8_t* p, std::uint32_t (&w)[kBytes / 4]) {
  constexpr int kWords = kBytes / 4;
  const std::uint32_t head = *reinterpret_cast<const std::uint16_t*>(p);
  const std::uint32_t tail = *reinterpret_cast<const std::uint16_t*>(p + kBytes - 2);
  const std::uint32_t* mid = reinterpret_cast<const std::uint32_t*>(p + 2);
  std::uint32_t x[kWords + 1];
  x[0] = head << 16;  // as if the word at p - 2 had been loaded (its low half is shifted out)
#pragma unroll
  for (int i = 0; i < kWords - 1; ++i) x[i + 1] = mid[i];
  x[kWords] = tail;
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __funnelshift_r(x[i], x[i + 1], 16);
}

// kBytes bytes at `p` (2-byte aligned at least: the dequantize checks the
// cache pointer, and record and field offsets are even) in the widest loads
// its address allows. Only alignments that change the loads get a branch: a
// 12-byte (3-bit) chunk takes the same three words at 4, 8 or 16, and every
// further branch splits the warp's lanes once more.
template <int kBytes>
__device__ __forceinline__ void load_any(const std::uint8_t* p, std::uint32_t (&w)[kBytes / 4]) {
  static_assert(kBytes % 4 == 0, "code chunks are whole words");
  const std::uintptr_t a = address_of(p);
  if constexpr (kBytes % 16 == 0) {
    if (a % 16 == 0) return load_chunk<kBytes, 16>(p, w);
  }
  if constexpr (kBytes % 8 == 0) {
    if (a % 8 == 0) return load_chunk<kBytes, 8>(p, w);
  }
  if (a % 4 == 0) return load_chunk<kBytes, 4>(p, w);
  load_half_shifted<kBytes>(p, w);
}

__device__ __forceinline__ std::uint32_t shfl_xor(std::uint32_t v, int m) { return __shfl_xor_sync(kFullWarp, v, m); }
__device__ __forceinline__ std::uint64_t shfl_xor(std::uint64_t v, int m) { return __shfl_xor_sync(kFullWarp, v, m); }

// A packed code array's bytes as the group loads them: lane `sub` the
// 4 * kBits bytes of its 32-dim chunk (dims 32 sub .. 32 sub + 31, i.e. rows
// 2 sub and 2 sub + 1; code d at bit kBits * d, core::unpack_code's order) in
// the widest loads its address allows.
template <int kBits>
struct CodeChunk {
  static constexpr int kWords = kBits;  // 32 codes of kBits bits
  std::uint32_t w[kWords];
  __device__ __forceinline__ void load(const std::uint8_t* codes, int sub) {
    load_any<4 * kWords>(codes + 4 * kWords * sub, w);
  }
};

// Lane `sub`'s run of kRun codes in every 16-dim row (group_contract.cuh's
// layout), made from the group's chunks by a transpose through shuffles:
// lane s's chunk holds rows 2s and 2s + 1, lane L needs bits
// [kRunBits * L, kRunBits * (L + 1)) of every row. Lane s first cuts its two
// rows into kLanes units, unit L = (row 2s's run of lane L, row 2s + 1's);
// log2(kLanes) butterfly stages (xor shuffles) then leave lane L holding unit
// s of every lane s.
template <int D, int kBits>
struct CodeRuns {
  using G = RecordGroup<D>;
  static constexpr int kRunBits = kBits * G::kRun;  // 6 .. 64
  using Word = std::conditional_t<(kRunBits > 32), std::uint64_t, std::uint32_t>;
  // Both rows' runs in one word where they fit, else a word each.
  static constexpr bool kPacked = 2 * kRunBits <= 32;
  struct Unit {
    Word lo, hi;
  };
  using Piece = std::conditional_t<kPacked, std::uint32_t, Unit>;

  Word run[G::kRows];  // row r's run in the low kRunBits bits

  // Bits [pos, pos + kRunBits) of the chunk (pos constant after unrolling).
  __device__ __forceinline__ static Word run_at(const CodeChunk<kBits>& c, int pos) {
    constexpr int kTotal = 32 * CodeChunk<kBits>::kWords;
    Word v = shifted_bits(c.w, pos, 0);
    if constexpr (kRunBits > 32) {
      if (pos + 32 < kTotal) v |= Word{shifted_bits(c.w, pos + 32, 0)} << 32;
    }
    if constexpr (kRunBits < 8 * sizeof(Word)) v &= (Word{1} << kRunBits) - 1u;
    return v;
  }
  __device__ __forceinline__ static Piece piece_of(const CodeChunk<kBits>& c, int lane) {
    const Word lo = run_at(c, kRunBits * lane), hi = run_at(c, 16 * kBits + kRunBits * lane);
    if constexpr (kPacked) {
      return lo | (hi << kRunBits);
    } else {
      return Unit{lo, hi};
    }
  }
  __device__ __forceinline__ static Piece select(bool c, const Piece& a, const Piece& b) {
    if constexpr (kPacked) {
      return c ? a : b;
    } else {
      return Unit{c ? a.lo : b.lo, c ? a.hi : b.hi};
    }
  }
  __device__ __forceinline__ static Piece exchange(const Piece& v, int m) {
    if constexpr (kPacked) {
      return shfl_xor(v, m);
    } else {
      return Unit{shfl_xor(v.lo, m), shfl_xor(v.hi, m)};
    }
  }

  __device__ __forceinline__ void from_chunk(const CodeChunk<kBits>& chunk, int sub) {
    Piece piece[G::kLanes];
#pragma unroll
    for (int lane = 0; lane < G::kLanes; ++lane) piece[lane] = piece_of(chunk, lane);
#pragma unroll
    for (int b = 1; b < G::kLanes; b <<= 1) {
      const bool upper = sub & b;
#pragma unroll
      for (int i = 0; i < G::kLanes; ++i) {
        if (i & b) continue;
        // The lower lane of the pair keeps piece i, the upper piece i | b
        // (values selected, not elements: a select of two array elements'
        // addresses would put the array in local memory).
        const Piece keep_lower = piece[i], keep_upper = piece[i | b];
        const Piece got = exchange(select(upper, keep_lower, keep_upper), b);
        piece[i] = select(upper, got, keep_lower);
        piece[i | b] = select(upper, keep_upper, got);
      }
    }
#pragma unroll
    for (int s = 0; s < G::kLanes; ++s) {
      if constexpr (kPacked) {
        run[2 * s] = piece[s] & ((1u << kRunBits) - 1u);
        run[2 * s + 1] = piece[s] >> kRunBits;
      } else {
        run[2 * s] = piece[s].lo;
        run[2 * s + 1] = piece[s].hi;
      }
    }
  }

  // Lane `sub`'s elements (group_contract.cuh's order): element e of row r is
  // to_float(code).
  template <class F>
  __device__ __forceinline__ void to_floats(F&& to_float, float (&out)[G::kElems]) const {
#pragma unroll
    for (int r = 0; r < G::kRows; ++r) {
#pragma unroll
      for (int e = 0; e < G::kRun; ++e) {
        out[r * G::kRun + e] = to_float(static_cast<std::uint32_t>(run[r] >> (kBits * e)) & ((1u << kBits) - 1u));
      }
    }
  }
};

}  // namespace turboquant::cuda::detail
