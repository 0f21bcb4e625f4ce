#include "errors.hpp"

#include <nanobind/nanobind.h>

namespace tqpy {

namespace nb = nanobind;
using turboquant::StatusCode;

void check(const turboquant::Status& status, const std::string& where) {
  if (status.ok()) return;
  const std::string message = (where.empty() ? "" : where + ": ") + status.to_string();
  switch (status.code()) {
    case StatusCode::kBackendUnavailable:
    case StatusCode::kDeviceError:
    case StatusCode::kInternal: throw std::runtime_error(message);
    default: throw nb::value_error(message.c_str());
  }
}

void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

}  // namespace tqpy
