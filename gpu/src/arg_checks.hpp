// Host-side checks of the CUDA entry points beyond turboquant::detail's
// (detail/validate.hpp): everything that can be checked without reading
// device memory.
#pragma once

#include <cstddef>
#include <string>

#include "turboquant/status.hpp"

namespace turboquant::cuda::detail {

inline Status invalid_argument(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }

// A buffer named `name` that must hold `needed` bytes (a size the caller has
// already computed without overflow), described as `what`.
inline Status check_bytes(const char* name, const void* data, std::size_t bytes, std::size_t needed,
                          const std::string& what) {
  if (needed == 0) return Status();
  if (data == nullptr) return Status(StatusCode::kBufferTooSmall, std::string(name) + " is null but must hold " + what);
  if (bytes < needed) {
    return Status(StatusCode::kBufferTooSmall, std::string(name) + " has " + std::to_string(bytes) + " bytes but " +
                                                   what + " needs " + std::to_string(needed));
  }
  return Status();
}

}  // namespace turboquant::cuda::detail
