// Lloyd-Max codebooks for the rotated key directions (facts §f).
#pragma once

#include <vector>

#include "turboquant/core/codebook.hpp"
#include "turboquant/status.hpp"

namespace turboquant {

using core::Codebook;

// vLLM's solve_lloyd_max(head_dim, bits) for N(0, 1/head_dim): the sorted
// centroids in double precision, before the fp32 rounding (for inspection).
std::vector<double> solve_lloyd_max(int head_dim, int bits);

// vLLM's fp32 codebook for (head_dim, bits), bits in 1..4, head_dim >= 1:
// centroids rounded to fp32, midpoints derived in fp32. Computed once per
// (head_dim, bits) and cached; thread-safe. Bit-identical to
// tests/data/vllm-codebooks.json for head_dim 64/128/256 and bits 2/3/4.
const Codebook& vllm_codebook(int head_dim, int bits);

// A codebook from caller-supplied sorted centroids (2^bits of them, finite,
// strictly increasing); midpoints derived as vLLM's backend does.
Status make_codebook(int bits, const std::vector<float>& centroids, Codebook* out);

}  // namespace turboquant
