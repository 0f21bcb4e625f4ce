#include "turboquant/status.hpp"

namespace turboquant {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kBufferTooSmall: return "buffer_too_small";
    case StatusCode::kNonFinite: return "non_finite";
    case StatusCode::kBackendUnavailable: return "backend_unavailable";
    case StatusCode::kDeviceError: return "device_error";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace turboquant
