// Division of 31-bit unsigned numbers by a divisor fixed at launch, as a
// multiply-high, an add and a shift (the kernels' divisions by a run-time
// divisor are otherwise ~17 instructions each). Exact for every n < 2^31:
// with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1, the quotient
// floor(n / d) is (umulhi(n, m) + n) >> s (Granlund and Montgomery's
// round-up method); umulhi(n, m) < n keeps the sum within 32 bits.
#pragma once

#include <cstdint>

namespace turboquant::cuda::detail {

struct FastDivisor {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;

  FastDivisor() = default;
  explicit FastDivisor(std::uint32_t d) : divisor(d) {  // 1 <= d <= 2^31
    while ((std::uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<std::uint32_t>((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - d) / d + 1);
  }

#ifdef __CUDACC__
  __device__ __forceinline__ std::uint32_t div(std::uint32_t n) const { return (__umulhi(n, multiplier) + n) >> shift; }
#endif
  // The same arithmetic on the host (tests).
  std::uint32_t div_host(std::uint32_t n) const {
    const auto hi = static_cast<std::uint32_t>((std::uint64_t{n} * multiplier) >> 32);
    return (hi + n) >> shift;
  }
};

}  // namespace turboquant::cuda::detail
