// The pieces of the extension module, one per file (module.cpp calls them).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "turboquant/format.hpp"

namespace tqpy {

namespace nb = nanobind;

// A cache's description: what turboquant.Layout wraps.
struct PyLayout {
  turboquant::Preset preset;
  turboquant::BlockLayout layout;
};

// Layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format),
// with every check of validate_layout.
PyLayout make_layout(const std::string& preset, int head_dim, int block_size, int num_kv_heads,
                     const std::string& layout, const std::string& fp8_format);

void bind_layout(nb::module_& m);  // Layout, codebook, backends, isas
void bind_ops(nb::module_& m);     // encode, decode, dequantize
void bind_case(nb::module_& m);    // the case-directory loader
void bind_check(nb::module_& m);   // validate
void bind_routes(nb::module_& m);  // how arrays reach a call, and its stream (tests, benchmarks)

}  // namespace tqpy
