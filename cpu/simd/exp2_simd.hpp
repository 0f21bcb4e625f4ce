// core::exp2_tq (core/exp2_log.hpp) on a whole register: the same floor, the
// same subtraction, the same Horner fused multiply-adds with the same fp32
// constants and the same 2^n built from bits, so every lane is bit-identical
// to the scalar function. The special cases are blended in afterwards, in
// the reverse order of the scalar early returns.
#pragma once

#include <cstdint>
#include <xsimd/xsimd.hpp>

#include "isa_traits.hpp"
#include "turboquant/core/float_ops.hpp"

namespace turboquant::cpu::simd {

template <class A>
xsimd::batch<float, A> exp2_tq(const xsimd::batch<float, A>& x) {
  using F = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  const F n = xsimd::floor(x);
  const F f = x - n;  // exact
  F p(0x1.c6e292p-13f);
  p = fma_rn<A>(p, f, F(0x1.46301cp-10f));
  p = fma_rn<A>(p, f, F(0x1.3d24eap-7f));
  p = fma_rn<A>(p, f, F(0x1.c68562p-5f));
  p = fma_rn<A>(p, f, F(0x1.ebfd9ap-3f));
  p = fma_rn<A>(p, f, F(0x1.62e42ap-1f));
  p = fma_rn<A>(p, f, F(1.0f));
  const I e = xsimd::to_int(n);  // n is integral: truncation is exact
  const F scale = xsimd::bitwise_cast<F>((e + I(127)) << 23);
  F r = p * scale;
  r = xsimd::select(x >= F(128.0f), F(core::kInf), r);
  r = xsimd::select(!(x > F(-126.0f)), F(0.0f), r);
  return xsimd::select(xsimd::isnan(x), x, r);
}

}  // namespace turboquant::cpu::simd
