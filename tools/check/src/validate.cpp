#include "turboquant/check/validate.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "text.hpp"
#include "turboquant/check/oracle.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::checks {

namespace {

// A span of `size` elements at `data` holds exactly `shape` (null only when the shape is empty).
Status check_elements(const char* name, const void* data, std::size_t size, const detail::TensorShape& shape) {
  std::int64_t bytes = 0;
  if (!shape.bytes(&bytes)) {
    return Status(StatusCode::kOutOfRange, std::string(name) + " " + shape.to_string() + " needs more than 2^63 bytes");
  }
  const std::int64_t want = bytes / static_cast<std::int64_t>(shape.element_bytes);
  if (want > 0 && data == nullptr) {
    return Status(StatusCode::kBufferTooSmall, std::string(name) + " is null but must hold " + shape.to_string());
  }
  if (static_cast<std::int64_t>(size) != want) {
    return Status(StatusCode::kInvalidArgument, std::string(name) + " has " + std::to_string(size) +
                                                    " elements but " + shape.to_string() + " has " +
                                                    std::to_string(want));
  }
  return Status();
}

DecodeArgs golden_args(const ValidationInputs& in) {
  DecodeArgs a;
  a.query = {in.query.data(), in.query.size_bytes()};
  a.batch = in.batch;
  a.num_q_heads = in.num_q_heads;
  a.block_table = {in.block_table.data(), in.block_table.size_bytes()};
  a.max_blocks_per_seq = in.max_blocks_per_seq;
  a.seq_lens = {in.seq_lens.data(), in.seq_lens.size_bytes()};
  a.softmax_scale = static_cast<float>(in.scale);
  a.num_splits = in.num_splits;
  a.codebook = in.codebook;
  a.query_start_loc = {in.query_start_loc.data(), in.query_start_loc.size_bytes()};
  a.num_query_rows = in.num_query_rows;
  a.sinks = {in.sinks.data(), in.sinks.size_bytes()};
  a.sliding_window = in.sliding_window;
  return a;
}

// The arguments decode_reference does not see: output, original K/V, reference, rtol, threads.
Status check_comparison_inputs(const ValidationInputs& in) {
  if (!(in.rtol >= 0) || !std::isfinite(in.rtol)) {
    return Status(StatusCode::kInvalidArgument,
                  internal::sprintf_string("rtol = %g: must be a finite number >= 0", in.rtol));
  }
  if (in.threads < 0) {
    return Status(StatusCode::kInvalidArgument, "threads = " + std::to_string(in.threads) + ": must be >= 0");
  }
  const std::int64_t B = in.query_start_loc.empty() ? in.batch : in.num_query_rows, Hq = in.num_q_heads, Hk = in.cache.layout.num_kv_heads,
                     D = in.cache.layout.format.head_dim;
  if (Status s = check_elements("output", in.output.data(), in.output.size(), {{B, Hq, D}, 4, "float32"}); !s.ok()) {
    return s;
  }
  if (in.reference_out_f64) {
    const std::span<const double> r = *in.reference_out_f64;
    if (Status s = check_elements("reference_out_f64", r.data(), r.size(), {{B, Hq, D}, 8, "float64"}); !s.ok()) {
      return s;
    }
  }
  if (in.original) {
    const OriginalKV& o = *in.original;
    const std::int64_t N = static_cast<std::int64_t>(o.slot_mapping.size());
    if (o.slot_mapping.data() == nullptr && (!o.keys.empty() || !o.values.empty())) {
      return Status(StatusCode::kBufferTooSmall, "slot_mapping is null but keys and values are given");
    }
    if (Status s = check_elements("keys", o.keys.data(), o.keys.size(), {{N, Hk, D}, 4, "float32"}); !s.ok()) return s;
    if (Status s = check_elements("values", o.values.data(), o.values.size(), {{N, Hk, D}, 4, "float32"}); !s.ok()) {
      return s;
    }
  }
  return Status();
}

}  // namespace

const ValidationRow* ValidationReport::row(std::string_view key) const {
  const auto it = std::find_if(rows.begin(), rows.end(), [key](const ValidationRow& r) { return r.key == key; });
  return it == rows.end() ? nullptr : &*it;
}

const Comparison* ValidationReport::format_error() const {
  const ValidationRow* r = format_error_measured ? row(kFormatError) : nullptr;
  return r == nullptr ? nullptr : &r->cmp;
}

Status validate_output(const ValidationInputs& in, ValidationReport* report) {
  if (report == nullptr) return Status(StatusCode::kInvalidArgument, "report is null");
  // The shapes the output's size depends on first, then the output, then the
  // full decode validation (tables, finiteness) inside decode_reference.
  DecodeArgs args = golden_args(in);
  if (Status s = detail::validate_cache(in.cache); !s.ok()) return s;
  if (Status s = detail::check_decode_scalars(in.cache.layout, args); !s.ok()) return s;
  if (Status s = check_comparison_inputs(in); !s.ok()) return s;

  const int Hq = in.num_q_heads, Hk = in.cache.layout.num_kv_heads, D = in.cache.layout.format.head_dim;
  const int threads = in.threads > 0 ? in.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // The golden model.
  std::vector<float> golden(in.output.size());
  args.out = {golden.data(), golden.size() * sizeof(float)};
  if (Status s = decode_reference(in.cache, args); !s.ok()) return s;

  // The float64 oracles.
  std::vector<int> all(static_cast<std::size_t>(in.batch));
  for (std::size_t b = 0; b < all.size(); ++b) all[b] = static_cast<int>(b);
  std::vector<std::int64_t> offsets;
  const std::vector<std::int64_t> slots =
      sequence_slots(in.cache.layout, in.block_table, in.max_blocks_per_seq, in.seq_lens, all, &offsets);
  DenseKV dequant;
  if (Status s = dequantized_kv(in.cache, in.codebook, slots, all, offsets, threads, &dequant); !s.ok()) {
    return Status(s.code(), "dequantize: " + s.message());
  }
  const bool multi_row = !in.query_start_loc.empty();
  const QueryRows rows = multi_row ? query_start_loc_rows(dequant, in.query_start_loc) : last_token_rows(dequant);
  const auto attention = [&](const DenseKV& kv) {
    return f64_attention_rows(kv, rows, in.query, Hq, in.scale, in.sinks, in.sliding_window, threads);
  };
  const std::vector<double> f64_dequant = attention(dequant);
  // The sequence of each query row, for the comparisons' locations (empty: row b is sequence b).
  std::vector<int> row_seq;
  if (multi_row) {
    for (const int i : rows.kv_index) row_seq.push_back(all[static_cast<std::size_t>(i)]);
  }
  const auto cmp = [&](std::span<const double> got, std::span<const double> want) {
    return compare(got, want, Hq, D, row_seq);
  };
  std::optional<std::vector<double>> f64_original;
  std::string original_note;
  if (in.original) {
    const OriginalKV& o = *in.original;
    DenseKV original;
    if (original_kv(o.slot_mapping, o.keys, o.values, Hk, D, slots, all, offsets, &original, &original_note)) {
      f64_original = attention(original);
    }
  } else {
    original_note = in.original_absent_note;
  }

  const std::vector<double> out = to_double(in.output), gold = to_double(golden);
  const std::string& name = in.output_name;
  ValidationReport& r = *report;
  r = ValidationReport{};
  r.output_name = name;
  r.rtol = in.rtol;
  r.multi_row = multi_row;
  r.rows.push_back({name + " vs golden", std::string(kVsGolden), "(kernel error)", cmp(out, gold)});
  r.rows.push_back({name + " vs f64(dequantized)", std::string(kVsF64Dequant), "", cmp(out, f64_dequant)});
  r.rows.push_back({"golden vs f64(dequantized)", std::string(kGoldenVsF64Dequant), "(golden model's own rounding)",
                    cmp(gold, f64_dequant)});
  if (f64_original) {
    r.rows.push_back({"f64(dequantized) vs f64(original)", std::string(kFormatError),
                      "(format error: the quantization itself)", cmp(f64_dequant, *f64_original)});
    r.rows.push_back(
        {name + " vs f64(original)", std::string(kVsF64Original), "", cmp(out, *f64_original)});
  }
  if (in.reference_out_f64) {
    r.rows.push_back({"f64(dequantized) vs reference_out_f64", std::string(kF64DequantVsReference),
                      "(the case's own f64 oracle)", cmp(f64_dequant, *in.reference_out_f64)});
  }
  r.format_error_measured = f64_original.has_value();
  r.original_note = original_note;
  // Garbage in the cache (NaN/Inf metadata) shows up as non-finite oracle values.
  r.oracle_non_finite =
      std::count_if(f64_dequant.begin(), f64_dequant.end(), [](double x) { return !std::isfinite(x); });
  r.pass = r.vs_golden().rel_l2 <= in.rtol;  // NaN fails
  return Status();
}

}  // namespace turboquant::checks
