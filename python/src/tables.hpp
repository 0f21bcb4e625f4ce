// The optional tables a call may bring: the caller's codebook (centroids) and
// dense rotation (PiT), checked as arrays; shared by every binding.
#pragma once

#include <optional>

#include "arrays.hpp"
#include "bindings.hpp"
#include "turboquant/codebook.hpp"

namespace tqpy {

// The caller's codebook (float32 [2^key_bits] centroids on the CPU; for FP8
// keys the 2^value_bits table vLLM passes), or none.
std::optional<turboquant::Codebook> caller_codebook(const PyLayout& l, const std::optional<InArray>& centroids);

// The caller's dense rotation, float32 [head_dim, head_dim] (on the call's device), or none.
std::optional<ArrayArg> caller_rotation(const PyLayout& l, const std::optional<InArray>& rotation);

}  // namespace tqpy
