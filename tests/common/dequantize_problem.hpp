// Dequantize arguments over a random Problem (random_problem.hpp), for the
// golden model's tests and the CUDA ones: the list form over the problem's
// slots, the block-table form over its sequences, and the relation between
// them (row (b, h, j) of the sequence form is row (offset_b + j, h) of the list
// form).
#pragma once

#include <cstdint>
#include <vector>

#include "common/random_problem.hpp"
#include "turboquant/dequantize.hpp"

namespace turboquant::testing {

inline constexpr std::uint8_t kDequantCanary = 0xA5;

struct DequantOutputs {
  std::vector<std::uint8_t> keys, values;
};

inline DequantOutputs canary_outputs(std::size_t elements, DType t) {
  return {std::vector<std::uint8_t>(elements * dtype_size(t), kDequantCanary),
          std::vector<std::uint8_t>(elements * dtype_size(t), kDequantCanary)};
}

inline std::size_t list_elements(const Problem& p) {
  return p.slots.size() * p.layout.num_kv_heads * p.layout.format.head_dim;
}

inline DequantizeArgs list_args(const Problem& p, DequantOutputs& o, DType t, Basis basis) {
  DequantizeArgs a;
  a.slots = {p.slots.data(), p.slots.size() * 8};
  a.num_slots = static_cast<std::int64_t>(p.slots.size());
  a.keys = {o.keys.data(), o.keys.size()};
  a.values = {o.values.data(), o.values.size()};
  a.out_dtype = t;
  a.basis = basis;
  return a;
}

inline int max_seq_of(const Problem& p, int extra) {
  int m = 0;
  for (int len : p.seq_lens) m = std::max(m, len);
  return m + extra;
}

inline std::size_t sequence_elements(const Problem& p, int max_seq) {
  return static_cast<std::size_t>(p.batch) * p.layout.num_kv_heads * max_seq * p.layout.format.head_dim;
}

inline DequantizeSequencesArgs sequence_args(const Problem& p, DequantOutputs& o, int max_seq, DType t, Basis basis) {
  DequantizeSequencesArgs a;
  a.block_table = {p.block_table.data(), p.block_table.size() * 4};
  a.batch = p.batch;
  a.max_blocks_per_seq = p.max_blocks;
  a.seq_lens = {p.seq_lens.data(), p.seq_lens.size() * 4};
  a.max_seq = max_seq;
  a.keys = {o.keys.data(), o.keys.size()};
  a.values = {o.values.data(), o.values.size()};
  a.out_dtype = t;
  a.basis = basis;
  return a;
}

// Whether the sequence form `seq` holds the list form's rows at every (b, h,
// j < seq_len) and the canary everywhere else.
inline bool sequences_match_list(const Problem& p, const std::vector<std::uint8_t>& seq,
                                 const std::vector<std::uint8_t>& list, int max_seq, DType t) {
  const std::size_t row = static_cast<std::size_t>(p.layout.format.head_dim) * dtype_size(t);
  const int hk = p.layout.num_kv_heads;
  std::int64_t offset = 0;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < hk; ++h) {
      for (int j = 0; j < max_seq; ++j) {
        const std::uint8_t* got = seq.data() + ((static_cast<std::size_t>(b) * hk + h) * max_seq + j) * row;
        if (j < p.seq_lens[b]) {
          const std::uint8_t* want = list.data() + ((offset + j) * hk + h) * row;
          if (!std::equal(got, got + row, want)) return false;
        } else if (!std::all_of(got, got + row, [](std::uint8_t x) { return x == kDequantCanary; })) {
          return false;
        }
      }
    }
    offset += p.seq_lens[b];
  }
  return true;
}

}  // namespace turboquant::testing
