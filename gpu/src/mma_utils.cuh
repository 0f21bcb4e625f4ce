// Small PTX wrappers for the fast decode: tensor-core mma, cp.async, packed
// conversions. sm_80+ (cvt from e4m3: sm_89+).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace turboquant::cuda::detail {

// D += A(16x16, row) * B(16x8, col); fp16 operands, fp32 accumulators.
// Fragments (lane l, g = l/4, c = l%4): a.x (row g, k 2c..2c+1), a.y (row g+8,
// k 2c..2c+1), a.z (row g, k 2c+8..2c+9), a.w (row g+8, k 2c+8..2c+9); b0 (k
// 2c..2c+1, col g), b1 (k 2c+8..2c+9, col g); d (row g, cols 2c, 2c+1), (row
// g+8, cols 2c, 2c+1).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint4& a, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// Transpose of an 8x8 fp16 matrix held as one mma fragment (lane l: row l/4,
// columns 2(l%4), 2(l%4)+1) into the same fragment layout.
__device__ __forceinline__ std::uint32_t transpose_8x8(std::uint32_t frag) {
  std::uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(frag));
  return r;
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

template <int kBytes>
__device__ __forceinline__ void cp_async(void* dst_smem, const void* src_global) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async sizes");
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst_smem)), "l"(src_global));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(dst_smem)), "l"(src_global),
                 "n"(kBytes));
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats -> fp16x2 (lo in the low half), round to nearest.
__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// Four 8x8 b16 matrices from shared memory: lane l gives the address of row
// l % 8 of matrix l / 8; register i receives matrix i's elements (row g, columns
// 2c, 2c + 1) for lane (g, c) = (l / 4, l % 4), the B fragment of mma_16816
// when a matrix holds B's columns as rows.
__device__ __forceinline__ void ldmatrix_x4(const void* row, std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2,
                                            std::uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(row)));
}

// The inverse of ldmatrix_x4: register i of lane (g, c) = (l / 4, l % 4) goes
// to (row g, columns 2c, 2c + 1) of matrix i, whose row l % 8 starts at lane
// l's `row` (l / 8 = i). One instruction for four 4-byte stores per lane
// (sm_90; elsewhere the four stores, each lane's rows found by shuffles).
__device__ __forceinline__ void stmatrix_x4(void* row, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                            std::uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(smem_addr(row)), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  const int lane = threadIdx.x & 31;
  const std::uint32_t r[4] = {r0, r1, r2, r3};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // Row g of matrix i starts at the address of lane 8 i + g.
    const auto base = reinterpret_cast<std::uintptr_t>(row);
    const auto start = __shfl_sync(0xffffffffu, base, 8 * i + (lane >> 2));
    reinterpret_cast<std::uint32_t*>(start)[lane & 3] = r[i];
  }
#endif
}

// Every fp16 half of a fragment squared, and squared plus `acc`'s (round to nearest).
__device__ __forceinline__ std::uint32_t square_half2(std::uint32_t v) {
  std::uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %1;\n" : "=r"(r) : "r"(v));
  return r;
}
__device__ __forceinline__ std::uint32_t square_add_half2(std::uint32_t v, std::uint32_t acc) {
  std::uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %1, %2;\n" : "=r"(r) : "r"(v), "r"(acc));
  return r;
}
__device__ __forceinline__ uint4 square_half2(const uint4& a) {
  return make_uint4(square_half2(a.x), square_half2(a.y), square_half2(a.z), square_half2(a.w));
}
__device__ __forceinline__ uint4 square_add_half2(const uint4& a, const uint4& acc) {
  return make_uint4(square_add_half2(a.x, acc.x), square_add_half2(a.y, acc.y), square_add_half2(a.z, acc.z),
                    square_add_half2(a.w, acc.w));
}

__device__ __forceinline__ float2 unpack_half2(std::uint32_t v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// Two e4m3 bytes (low byte -> low half) -> fp16x2; exact (every e4m3 value is an fp16 value).
__device__ __forceinline__ std::uint32_t e4m3x2_to_half2(std::uint32_t two_bytes) {
  std::uint32_t r;
  asm("{\n .reg .b16 t;\n cvt.u16.u32 t, %1;\n cvt.rn.f16x2.e4m3x2 %0, t;\n}\n" : "=r"(r) : "r"(two_bytes));
  return r;
}

// Two e4b15 bytes of `word` (bytes 0, 1: kLowBytes; bytes 2, 3: kHighBytes;
// the lower byte -> the low half) -> fp16x2; exact, the bits of
// core::fp8_e4b15_to_fp16_bits per byte: sign << 8 | magnitude << 7, i.e.
// (b + (b & 0x80)) << 7, with each byte spread to its own half first.
inline constexpr std::uint32_t kLowBytes = 0x4140u;   // byte_perm selector: [b0, 0, b1, 0]
inline constexpr std::uint32_t kHighBytes = 0x4342u;  // [b2, 0, b3, 0]
__device__ __forceinline__ std::uint32_t e4b15x2_to_half2(std::uint32_t word, std::uint32_t selector) {
  const std::uint32_t spread = __byte_perm(word, 0u, selector);
  return (spread + (spread & 0x00800080u)) << 7;
}

__device__ __forceinline__ std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  return __byte_perm(a, b, sel);
}

// (a & b) | c in one LOP3.
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Small integer codes sitting in the low mantissa bits of each half of `word`
// (selected by `mask`) -> exact fp16x2 values: OR them into 1024.0 (0x6400, whose
// mantissa step is 1) and subtract 1024. A code at bit k becomes code * 2^k, or,
// with undo = 2^-k (a compile-time constant after unrolling), the code itself in
// the same one instruction: fma(1024 + code 2^k, 2^-k, -1024 2^-k) is exact, as
// every term is an fp16 integer below 2048 scaled by a power of two.
__device__ __forceinline__ std::uint32_t masked_codes_to_half2(std::uint32_t word, std::uint32_t mask,
                                                               float undo = 1.0f) {
  const std::uint32_t biased = and_or(word, mask, 0x64006400u);
  std::uint32_t r;
  if (undo == 1.0f) {
    asm("sub.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(biased), "r"(0x64006400u));
  } else {
    const __half2 m = __float2half2_rn(undo);
    const __half2 c = __float2half2_rn(-1024.0f * undo);
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n"
        : "=r"(r)
        : "r"(biased), "r"(*reinterpret_cast<const std::uint32_t*>(&m)), "r"(*reinterpret_cast<const std::uint32_t*>(&c)));
  }
  return r;
}

// The bit stream of a little-endian word array shifted so that bit `pos` lands
// at bit `lsh` (bits below lsh and above the stream's end are unspecified or 0;
// callers mask). pos and lsh are compile-time after unrolling.
template <int W>
__device__ __forceinline__ std::uint32_t shifted_bits(const std::uint32_t (&w)[W], int pos, int lsh) {
  const int i = pos / 32;
  const int sh = pos % 32;
  if (sh >= lsh) {
    const int r = sh - lsh;
    if (r == 0) return w[i];
    if (i + 1 < W) return __funnelshift_r(w[i], w[i + 1], r);
    return w[i] >> r;
  }
  return w[i] << (lsh - sh);
}

// Loads kBytes bytes at `p` (shared or global memory, aligned to kAlign) into words,
// little-endian, using the widest loads the alignment allows.
template <int kBytes, int kAlign>
__device__ __forceinline__ void load_chunk(const std::uint8_t* p, std::uint32_t (&w)[(kBytes + 3) / 4]) {
  if constexpr (kAlign >= 16 && kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (kAlign >= 8 && kBytes % 8 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 8; ++i) {
      const uint2 v = reinterpret_cast<const uint2*>(p)[i];
      w[2 * i] = v.x;
      w[2 * i + 1] = v.y;
    }
  } else if constexpr (kAlign >= 4 && kBytes % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 4; ++i) w[i] = reinterpret_cast<const std::uint32_t*>(p)[i];
  } else if constexpr (kAlign >= 2 && kBytes % 2 == 0) {
#pragma unroll
    for (int i = 0; i < (kBytes + 3) / 4; ++i) w[i] = 0;
#pragma unroll
    for (int i = 0; i < kBytes / 2; ++i) {
      w[i / 2] |= std::uint32_t{reinterpret_cast<const std::uint16_t*>(p)[i]} << (16 * (i % 2));
    }
  } else {
#pragma unroll
    for (int i = 0; i < (kBytes + 3) / 4; ++i) w[i] = 0;
#pragma unroll
    for (int i = 0; i < kBytes; ++i) w[i / 4] |= std::uint32_t{p[i]} << (8 * (i % 4));
  }
}

}  // namespace turboquant::cuda::detail
