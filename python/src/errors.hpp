// The library's Status as a Python exception: bad arguments (invalid,
// out of range, too small, non-finite, unsupported) are ValueError with the
// library's own message ("invalid_argument: seq_lens[3] = 99 exceeds ...");
// an unavailable backend or a failing device call is RuntimeError.
#pragma once

#include <string>

#include "turboquant/status.hpp"

namespace tqpy {

// Throws unless ok; `where` (e.g. "decode") prefixes the message.
void check(const turboquant::Status& status, const std::string& where = "");

[[noreturn]] void throw_value_error(const std::string& message);

}  // namespace tqpy
