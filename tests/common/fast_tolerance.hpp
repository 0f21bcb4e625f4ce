// The CUDA fast decode's error bound against the golden model (relative L2 of
// the output), for the tests that run it on the shared vLLM cases.
#pragma once

#include <string>

namespace turboquant::testing {

// The contract's 1e-3 (docs/ARITHMETIC.md §6) on every case. The sharp case
// a05 (query x4, key channels scaled up to x12) exceeded it (1.08e-3, finding
// F11 of docs/RELIABILITY.md) until the fast kernel's pair table took the
// centroid scale (decode_plan.cpp's fast_centroid_scale); the case argument
// stays so that a case-specific bound has one home if one is ever needed.
inline double fast_decode_tolerance(const std::string& /*case_dir*/) { return 1e-3; }

}  // namespace turboquant::testing
