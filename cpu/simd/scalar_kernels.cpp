// The "scalar" ISA: the reference's own steps (core/), organised in the same
// work items as the SIMD kernels so that it runs on every x86-64 CPU, in
// parallel. Also the scalar fallbacks the SIMD kernels call for rare inputs.
// Compiled with the baseline flags only.
#include <cstring>

#include "kernels.hpp"
#include "turboquant/core/decode_split.hpp"
#include "turboquant/core/elements.hpp"
#include "turboquant/core/split_plan.hpp"
#include "turboquant/core/token_codec.hpp"

namespace turboquant::cpu {

namespace fallback {

float exp2(float x) { return core::exp2_tq(x); }
float log2(float x) { return core::log2_tq(x); }
float fold_tile(core::SoftmaxState& state, const float* scores, int n, float* probs) {
  return core::softmax_fold_tile(state, scores, n, probs);
}
void decode_fp8(core::Fp8Format f, const std::uint8_t* bytes, int dims, float* out) {
  for (int d = 0; d < dims; ++d) out[d] = core::fp8_to_float(f, bytes[d]);
}
void encode_fp8(core::Fp8Format f, const float* k, int dims, std::uint8_t* out) {
  for (int d = 0; d < dims; ++d) out[d] = core::float_to_fp8(f, k[d]);
}
core::ValueRange value_range(const float* v, int dims) { return core::value_range(v, dims); }
void encode_token_head(const EncodeProblem& p, std::uint8_t* block, int t, int h, const float* k, const float* v) {
  core::encode_token_head(p.layout, block, t, h, k, v, *p.codebook, p.rotation);
}

}  // namespace fallback

namespace {

// decode_reference's work item (core::decode_split), into the item's partials.
void decode_item(const DecodeProblem& p, int b, int h, int s, float* scratch) {
  const core::TokenRange range = p.token_range(b, s);
  if (range.empty()) return;
  const int group = p.group;
  float* states_at = scratch + core::decode_split_scratch_floats(group, p.head_dim());
  auto* states = reinterpret_cast<core::SoftmaxState*>(states_at);
  const std::int32_t* block_row = p.block_row(b);
  core::decode_split(p.layout, p.cache, block_row, h, range, *p.codebook, p.query(b, h * group), group, states,
                     p.acc(b, h * group, s), p.partials.acc_row_stride(), scratch);
  for (int g = 0; g < group; ++g) {
    float* ml = p.max_sum(b, h * group + g, s);
    ml[0] = states[g].max;
    ml[1] = states[g].sum;
  }
}

// The scalar ISA keeps to the golden model's loop: one row at a time (it is
// the contract's path on CPUs without AVX2, not a fast one).
void decode_rows(const DecodeProblem& p, int r0, int r1, int h, int s, float* scratch) {
  for (int b = r0; b < r1; ++b) decode_item(p, b, h, s, scratch);
}

void merge_row(const DecodeProblem& p, int b, int q_head, float* out, float* lse) {
  const int dims = p.head_dim();
  const auto empty = [&](int s) { return p.token_range(b, s).empty(); };
  const bool has_sink = p.sink_logits != nullptr;
  const float sink = has_sink ? p.sink_logits[q_head] : 0.0f;
  float lse_max = -core::kInf;
  float merged_max = has_sink ? sink : -core::kInf;
  for (int s = 0; s < p.num_splits; ++s) {
    if (empty(s)) continue;
    lse_max = core::merge_max(lse_max, p.max_sum(b, q_head, s)[0]);
    merged_max = core::merge_max(merged_max, p.max_sum(b, q_head, s)[0]);
  }
  float sum = has_sink ? core::merge_weight(sink, merged_max) : 0.0f;
  float lse_sum = 0.0f;
  for (int d = 0; d < dims; ++d) out[d] = 0.0f;
  for (int s = 0; s < p.num_splits; ++s) {
    if (empty(s)) continue;
    const float* part = p.acc(b, q_head, s);
    const float* ml = p.max_sum(b, q_head, s);
    const float w = core::merge_weight(ml[0], merged_max);
    sum = core::merge_add(sum, w, ml[1]);
    lse_sum = core::merge_add(lse_sum, core::merge_weight(ml[0], lse_max), ml[1]);
    for (int d = 0; d < dims; ++d) out[d] = core::merge_add(out[d], w, part[d]);
  }
  for (int d = 0; d < dims; ++d) out[d] = core::finalize_output(out[d], sum, merged_max);
  *lse = core::finalize_lse(lse_sum, lse_max);
}

void encode_tokens(const EncodeProblem& p, std::int64_t begin, std::int64_t end) {
  const core::BlockLayout& l = p.layout;
  const int dims = l.format.head_dim;
  float k[core::kMaxHeadDim];
  float v[core::kMaxHeadDim];
  for (std::int64_t i = begin; i < end; ++i) {
    std::int64_t slot;
    std::memcpy(&slot, static_cast<const std::uint8_t*>(p.slot_mapping) + 8 * i, 8);
    if (slot < 0) continue;
    std::uint8_t* block = p.cache + l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      const std::int64_t first = (i * l.num_kv_heads + h) * dims;
      core::load_row(p.keys, p.dtype, first, dims, k);
      core::load_row(p.values, p.dtype, first, dims, v);
      core::encode_token_head(l, block, t, h, k, v, *p.codebook, p.rotation);
    }
  }
}

}  // namespace

extern const IsaKernels kScalarKernels = {"scalar", &decode_item, &decode_rows, &merge_row, &encode_tokens};

}  // namespace turboquant::cpu
