// meta.json of a case directory (case_dir.cpp loads the rest): every key
// checked, unknown keys refused. Private to turboquant::io.
#pragma once

#include <string>

#include "turboquant/io/case_dir.hpp"

namespace turboquant::io::detail {

// kInvalidArgument "<where>: <what>", the form of every case-file error.
inline Status invalid(const std::string& where, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, where + ": " + what);
}

// Reads `path` into c's meta.json fields (preset, format with its layout and
// FP8 flavour, layout, heads, scale, splits, source).
Status parse_case_meta(const std::string& path, CaseDir* c);

}  // namespace turboquant::io::detail
