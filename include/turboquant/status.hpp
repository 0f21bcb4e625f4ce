// Errors: every public function returns a Status; the convenience layer
// (cache.hpp, check()) throws turboquant::Error carrying the same code and message.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace turboquant {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // a value is outside what the format or the API allows
  kUnsupported,         // valid in general, not supported by this format/backend
  kOutOfRange,          // an index (block id, slot, seq_len) points outside its buffer
  kBufferTooSmall,      // a buffer is null or smaller than its shape needs
  kNonFinite,           // NaN or Inf where finite numbers are required
  kBackendUnavailable,  // e.g. no CUDA device, or an ISA this CPU cannot run
  kDeviceError,         // a CUDA call failed
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: block_size = 0: must be >= 1"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

class Error : public std::runtime_error {
 public:
  explicit Error(const Status& status) : std::runtime_error(status.to_string()), code_(status.code()) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

// Throws Error unless `status` is ok.
inline void check(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace turboquant
