// Element types of queries, keys, values and outputs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace turboquant {

enum class DType : std::uint8_t { kFloat32, kFloat16, kBFloat16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }
constexpr const char* dtype_name(DType t) {
  return t == DType::kFloat32 ? "float32" : (t == DType::kFloat16 ? "float16" : "bfloat16");
}

// A non-owning read-only buffer of `bytes` bytes. Shapes come from the call's
// other arguments; validation checks that `bytes` covers them.
struct ConstBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
};
struct MutableBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace turboquant
