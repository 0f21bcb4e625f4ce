// The one list of what the CUDA kernels are instantiated for, and the
// dispatch from run-time (head_dim, key bits, value bits) to those
// instantiations. head_dims come from the CMake list TURBOQUANT_CUDA_HEAD_DIMS
// (generated head_dims.hpp; one instance file per entry); the bit pairs are
// listed here. Everything else is kUnsupported, naming the value.
#pragma once

#include <string>
#include <type_traits>

#include "head_dims.hpp"
#include "turboquant/core/format.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

template <int... D>
struct DimList {};
using HeadDims = DimList<TQ_CUDA_HEAD_DIMS>;

template <int K, int V>
struct Bits {
  static constexpr int kKey = K;
  static constexpr int kValue = V;
};
template <class... B>
struct BitsList {};
// Strict decode: every format (key bits 3, 4, 8; value bits 3, 4).
using StrictBits = BitsList<Bits<8, 4>, Bits<8, 3>, Bits<4, 4>, Bits<4, 3>, Bits<3, 4>, Bits<3, 3>>;
// Fast decode: the presets' pairs; other formats fall back to strict.
using FastBits = BitsList<Bits<8, 4>, Bits<4, 4>, Bits<3, 4>, Bits<3, 3>>;

template <int... D>
constexpr bool contains(DimList<D...>, int head_dim) {
  return ((head_dim == D) || ...);
}
template <class... B>
constexpr bool contains(BitsList<B...>, int key_bits, int value_bits) {
  return ((key_bits == B::kKey && value_bits == B::kValue) || ...);
}

// "64, 128 and 256": the head_dims of the build.
std::string head_dims_text();
// kUnsupported "head_dim = 96: the CUDA <what> supports 64, 128 and 256".
Status unsupported_head_dim(int head_dim, const char* what);
inline Status check_head_dim(int head_dim, const char* what) {
  return contains(HeadDims{}, head_dim) ? Status() : unsupported_head_dim(head_dim, what);
}
// kUnsupported "key_bits = 5, value_bits = 2: the CUDA <what> has no instance".
Status unsupported_bits(int key_bits, int value_bits, const char* what);

// f(std::integral_constant<int, D>{}) for the listed D equal to head_dim
// (f returns Status); kUnsupported for any other head_dim.
template <int D0, int... D, class F>
Status dispatch_head_dim(DimList<D0, D...>, int head_dim, const char* what, F&& f) {
  if (head_dim == D0) return f(std::integral_constant<int, D0>{});
  if constexpr (sizeof...(D) == 0) {
    return unsupported_head_dim(head_dim, what);
  } else {
    return dispatch_head_dim(DimList<D...>{}, head_dim, what, f);
  }
}

// f(Bits<K, V>{}) for the listed pair equal to (key_bits, value_bits).
template <class B0, class... B, class F>
Status dispatch_bits(BitsList<B0, B...>, int key_bits, int value_bits, const char* what, F&& f) {
  if (key_bits == B0::kKey && value_bits == B0::kValue) return f(B0{});
  if constexpr (sizeof...(B) == 0) {
    return unsupported_bits(key_bits, value_bits, what);
  } else {
    return dispatch_bits(BitsList<B...>{}, key_bits, value_bits, what, f);
  }
}

// f(std::integral_constant<core::LayoutKind, L>{}) for the cache's layout
// kind: every kernel is instantiated for both (core::LayoutKind).
template <class F>
Status dispatch_layout(core::LayoutKind kind, F&& f) {
  if (kind == core::LayoutKind::kAoS) return f(std::integral_constant<core::LayoutKind, core::LayoutKind::kAoS>{});
  return f(std::integral_constant<core::LayoutKind, core::LayoutKind::kSoA>{});
}

}  // namespace turboquant::cuda::detail
