// Private: the parser of the .npy header's Python dict literal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "turboquant/io/npy.hpp"

namespace turboquant::io {

struct NpyHeader {
  NpyDType dtype = NpyDType::kFloat32;
  std::vector<std::int64_t> shape;
};

// `text` is the header exactly as stored (padding and final '\n' included).
// Accepts only the dict numpy writes: the keys descr, fortran_order and shape,
// each once, in any order, with Python's literal syntax.
Status parse_npy_header(std::string_view text, const std::string& name, NpyHeader* out);

}  // namespace turboquant::io
