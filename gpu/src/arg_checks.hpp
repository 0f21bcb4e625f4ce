// Host-side checks shared by the decode and encode entry points: everything
// that can be checked without reading device memory.
#pragma once

#include <cstddef>
#include <string>

#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

inline Status invalid_argument(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }

// A buffer named `name` that must hold `needed` bytes of `shape`.
inline Status check_buffer(const char* name, const void* data, std::size_t bytes, std::size_t needed,
                           const std::string& shape) {
  if (needed == 0) return Status();
  if (data == nullptr) return Status(StatusCode::kBufferTooSmall, std::string(name) + " is null but must hold " + shape);
  if (bytes < needed) {
    return Status(StatusCode::kBufferTooSmall, std::string(name) + " has " + std::to_string(bytes) + " bytes but " +
                                                   shape + " needs " + std::to_string(needed));
  }
  return Status();
}

inline std::string shape_string(std::initializer_list<long long> dims, const char* dtype) {
  std::string s = "[";
  bool first = true;
  for (long long d : dims) {
    if (!first) s += ", ";
    s += std::to_string(d);
    first = false;
  }
  return s + "] " + dtype;
}

}  // namespace turboquant::cuda::detail
