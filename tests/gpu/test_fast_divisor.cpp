// FastDivisor (gpu/src/fast_divisor.hpp), the kernels' division by a divisor
// fixed at launch: its host arithmetic (the device's is the same three
// operations) equals integer division for the divisors and numerators the
// kernels use, edges included. Host-only: runs in CI.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "fast_divisor.hpp"

namespace {

using turboquant::cuda::detail::FastDivisor;

void expect_exact(std::uint32_t d, std::mt19937& rng, int samples) {
  const FastDivisor f(d);
  const auto check = [&](std::uint32_t n) { ASSERT_EQ(f.div_host(n), n / d) << "n = " << n << ", d = " << d; };
  for (std::uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7ffffffeu, 0x7fffffffu}) {
    if (n < 0x80000000u) check(n);
  }
  for (int i = 0; i < samples; ++i) check(rng() & 0x7fffffffu);
}

TEST(FastDivisor, QuotientsEqualIntegerDivision) {
  std::mt19937 rng(7);
  for (std::uint32_t d = 1; d <= 4096; ++d) expect_exact(d, rng, 200);
  for (std::uint32_t d : {65535u, 65536u, 65537u, 1000003u, 0x12345678u, 0x40000000u, 0x7fffffffu, 0x80000000u}) {
    expect_exact(d, rng, 100000);
  }
}

TEST(FastDivisor, MultiplesLandOnTheirQuotient) {
  for (std::uint32_t d : {1u, 3u, 7u, 16u, 48u, 100u, 32768u, 1000000u}) {
    const FastDivisor f(d);
    for (std::uint32_t q = 0; q < 2000 && std::uint64_t{q} * d < 0x80000000u; ++q) {
      ASSERT_EQ(f.div_host(q * d), q) << "d = " << d;
      if (q > 0) {
        ASSERT_EQ(f.div_host(q * d - 1), q - 1) << "d = " << d;
      }
    }
  }
}

}  // namespace
