// printf into a std::string, any length (the report's lines must be exactly
// what printf would print).
#pragma once

#include <string>

namespace turboquant::checks::internal {

std::string sprintf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace turboquant::checks::internal
