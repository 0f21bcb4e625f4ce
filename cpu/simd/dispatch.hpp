// Which kernels run: picked once per call, outside every loop, from a table
// of ISAs listed high to low and ending with the scalar baseline (the order
// xsimd's own dispatcher uses). options.isa, else the environment variable
// TURBOQUANT_ISA, may force one; an ISA this CPU cannot run is an error, never
// a silent fallback. Private to the CPU backend.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cpu {

// ISAs this CPU runs, lowest first ("scalar" always).
std::vector<std::string> runnable_isas();

// The kernels for `requested` ("" means TURBOQUANT_ISA, then the best one).
Status select_isa(std::string_view requested, const IsaKernels** out);

// The checks every CPU entry point makes, reported in this order:
// options.threads, the call's arguments (`arguments`: validate_decode's or
// validate_encode's result), then select_isa(options.isa).
Status start_call(const CpuOptions& options, const Status& arguments, const IsaKernels** out);

}  // namespace turboquant::cpu
