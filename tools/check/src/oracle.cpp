#include "turboquant/check/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace turboquant::checks {

void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  const std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n));
  if (workers <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < workers; ++w) {
    const std::int64_t begin = n * w / workers, end = n * (w + 1) / workers;
    pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  for (std::thread& t : pool) t.join();
}

std::vector<std::int64_t> sequence_slots(const turboquant::BlockLayout& layout,
                                         std::span<const std::int32_t> block_table, int max_blocks,
                                         std::span<const std::int32_t> seq_lens, const std::vector<int>& sequences,
                                         std::vector<std::int64_t>* offsets) {
  const int bs = layout.block_size;
  std::vector<std::int64_t> slots;
  offsets->assign(1, 0);
  for (int b : sequences) {
    for (int t = 0; t < seq_lens[b]; ++t) {
      const std::int64_t block = block_table[static_cast<std::size_t>(b) * max_blocks + t / bs];
      slots.push_back(block * bs + t % bs);
    }
    offsets->push_back(static_cast<std::int64_t>(slots.size()));
  }
  return slots;
}

Status dequantized_kv(const ConstCacheView& cache, const Codebook* codebook, const std::vector<std::int64_t>& slots,
                      const std::vector<int>& sequences, const std::vector<std::int64_t>& offsets, int threads,
                      DenseKV* out) {
  DenseKV& kv = *out;
  kv = DenseKV{};
  kv.num_kv_heads = cache.layout.num_kv_heads;
  kv.head_dim = cache.layout.format.head_dim;
  kv.sequences = sequences;
  kv.offsets = offsets;
  const std::size_t row = static_cast<std::size_t>(kv.num_kv_heads) * kv.head_dim;
  kv.keys.resize(slots.size() * row);
  kv.values.resize(slots.size() * row);
  std::mutex mutex;
  Status error;
  parallel_for(static_cast<std::int64_t>(slots.size()), threads, [&](std::int64_t begin, std::int64_t end) {
    DequantizeArgs a;
    a.slots = {slots.data() + begin, static_cast<std::size_t>(end - begin) * 8};
    a.num_slots = end - begin;
    a.keys = {kv.keys.data() + begin * row, static_cast<std::size_t>(end - begin) * row * 4};
    a.values = {kv.values.data() + begin * row, static_cast<std::size_t>(end - begin) * row * 4};
    a.basis = Basis::kOriginal;
    a.codebook = codebook;
    const Status s = dequantize_reference(cache, a);
    if (!s.ok()) {
      const std::lock_guard<std::mutex> lock(mutex);
      error = s;
    }
  });
  return error;
}

bool original_kv(std::span<const std::int64_t> slot_mapping, std::span<const float> keys, std::span<const float> values,
                 int num_kv_heads, int head_dim, const std::vector<std::int64_t>& slots,
                 const std::vector<int>& sequences, const std::vector<std::int64_t>& offsets, DenseKV* out,
                 std::string* why) {
  std::unordered_map<std::int64_t, std::int64_t> token_of_slot;
  token_of_slot.reserve(slot_mapping.size());
  // A slot written twice holds the last write (the store runs in token order).
  for (std::size_t i = 0; i < slot_mapping.size(); ++i) {
    if (slot_mapping[i] >= 0) token_of_slot[slot_mapping[i]] = static_cast<std::int64_t>(i);
  }
  DenseKV& kv = *out;
  kv = DenseKV{};
  kv.num_kv_heads = num_kv_heads;
  kv.head_dim = head_dim;
  kv.sequences = sequences;
  kv.offsets = offsets;
  const std::size_t row = static_cast<std::size_t>(num_kv_heads) * head_dim;
  kv.keys.resize(slots.size() * row);
  kv.values.resize(slots.size() * row);
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    for (std::int64_t j = offsets[i]; j < offsets[i + 1]; ++j) {
      const auto it = token_of_slot.find(slots[j]);
      if (it == token_of_slot.end()) {
        *why = "sequence " + std::to_string(sequences[i]) + " position " + std::to_string(j - offsets[i]) +
               " reads slot " + std::to_string(slots[j]) + ", which slot_mapping.npy never writes";
        return false;
      }
      std::copy_n(keys.begin() + it->second * row, row, kv.keys.begin() + j * row);
      std::copy_n(values.begin() + it->second * row, row, kv.values.begin() + j * row);
    }
  }
  return true;
}

QueryRows last_token_rows(const DenseKV& kv) {
  QueryRows rows;
  for (std::size_t i = 0; i < kv.sequences.size(); ++i) {
    rows.kv_index.push_back(static_cast<int>(i));
    rows.query_row.push_back(kv.sequences[i]);
    rows.position.push_back(kv.offsets[i + 1] - kv.offsets[i] - 1);
  }
  return rows;
}

QueryRows query_start_loc_rows(const DenseKV& kv, std::span<const std::int32_t> query_start_loc) {
  QueryRows rows;
  for (std::size_t i = 0; i < kv.sequences.size(); ++i) {
    const int b = kv.sequences[i];
    const std::int64_t len = kv.offsets[i + 1] - kv.offsets[i];
    const std::int32_t first = query_start_loc[b], q_len = query_start_loc[b + 1] - first;
    for (std::int32_t j = 0; j < q_len; ++j) {
      rows.kv_index.push_back(static_cast<int>(i));
      rows.query_row.push_back(first + j);
      rows.position.push_back(len - q_len + j);
    }
  }
  return rows;
}

std::vector<double> f64_attention(const DenseKV& kv, std::span<const float> query, int num_q_heads, double scale,
                                  int threads) {
  return f64_attention_rows(kv, last_token_rows(kv), query, num_q_heads, scale, {}, 0, threads);
}

std::vector<double> f64_attention_rows(const DenseKV& kv, const QueryRows& query_rows, std::span<const float> query,
                                       int num_q_heads, double scale, std::span<const float> sinks,
                                       int sliding_window, int threads) {
  const int D = kv.head_dim, Hk = kv.num_kv_heads, group = num_q_heads / Hk;
  const std::int64_t rows = static_cast<std::int64_t>(query_rows.kv_index.size()) * num_q_heads;
  std::vector<double> out(static_cast<std::size_t>(rows) * D, 0.0);
  parallel_for(rows, threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> q(D), acc(D), scores;
    for (std::int64_t r = begin; r < end; ++r) {
      const std::size_t row = static_cast<std::size_t>(r / num_q_heads);
      const std::size_t i = static_cast<std::size_t>(query_rows.kv_index[row]);
      const int hq = static_cast<int>(r % num_q_heads), h = hq / group;
      const std::int64_t p = query_rows.position[row];
      const std::int64_t lo = sliding_window > 0 ? std::max<std::int64_t>(0, p + 1 - sliding_window) : 0;
      const std::int64_t first = kv.offsets[i] + lo, len = p + 1 - lo;
      if (len <= 0) continue;
      const float* qrow = query.data() + (query_rows.query_row[row] * num_q_heads + hq) * D;
      for (int d = 0; d < D; ++d) q[d] = qrow[d];
      scores.resize(static_cast<std::size_t>(len));
      double mx = sinks.empty() ? -INFINITY : static_cast<double>(sinks[hq]);
      for (std::int64_t t = 0; t < len; ++t) {
        const float* k = kv.keys.data() + ((first + t) * Hk + h) * D;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[d] * k[d];
        scores[t] = dot * scale;
        mx = std::max(mx, scores[t]);
      }
      double den = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t t = 0; t < len; ++t) {
        const double w = std::exp(scores[t] - mx);
        den += w;
        const float* v = kv.values.data() + ((first + t) * Hk + h) * D;
        for (int d = 0; d < D; ++d) acc[d] += w * v[d];
      }
      if (!sinks.empty()) den += std::exp(static_cast<double>(sinks[hq]) - mx);  // the sink: denominator only
      for (int d = 0; d < D; ++d) out[static_cast<std::size_t>(r) * D + d] = acc[d] / den;
    }
  });
  return out;
}

}  // namespace turboquant::checks
