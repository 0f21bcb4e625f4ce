// Is this attention output what the TurboQuant format says it should be?
// validate_output decodes the cache with the golden model (decode_reference)
// and compares the output under test with it (the verdict) and with float64
// attention over the dequantized cache and, when given, over the original K/V.
// `tq validate` and the Python package's turboquant.validate() are this
// function: same inputs, same numbers, same verdict. Plain C++: every array is
// a span over host memory (a numpy buffer), no JSON or CLI types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/check/compare.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/status.hpp"

namespace turboquant::checks {

// The K/V before quantization, as they were given to the store: the format
// error is measured on them.
struct OriginalKV {
  std::span<const float> keys;                 // float32 [num_tokens, Hk, D]
  std::span<const float> values;               // float32 [num_tokens, Hk, D]
  std::span<const std::int64_t> slot_mapping;  // int64 [num_tokens]; < 0 skips a token
};

struct ValidationInputs {
  // The decode, as for decode_reference (same checks, same messages).
  ConstCacheView cache;
  const Codebook* codebook = nullptr;  // Lloyd-Max keys: null = vllm_codebook(head_dim, key_bits)
  std::span<const float> query;        // float32 [batch, num_q_heads, head_dim], unrotated
  int batch = 0;
  int num_q_heads = 0;
  std::span<const std::int32_t> block_table;  // int32 [batch, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  std::span<const std::int32_t> seq_lens;  // int32 [batch]
  double scale = 0;                        // the golden decode uses float(scale), the oracles the double
  int num_splits = 32;
  // Multi-token rows, sinks, sliding window (DecodeArgs, ARITHMETIC.md §7).
  // T below is num_query_rows with query_start_loc, else batch.
  std::span<const std::int32_t> query_start_loc;  // optional int32 [batch + 1]; empty: one row per sequence
  int num_query_rows = 0;                         // T = query_start_loc[batch] (with query_start_loc)
  std::span<const float> sinks;                   // optional float32 [num_q_heads]
  int sliding_window = 0;                         // W > 0: row at p attends to p - W + 1 .. p

  std::span<const float> output;        // float32 [T, num_q_heads, head_dim]: the output under test
  std::string output_name = "output";   // how rows and the verdict name it ("expected_out.npy")
  std::optional<OriginalKV> original;   // the format error is measured only with these
  std::string original_absent_note = "no original keys/values/slot_mapping given";  // why, when not given
  std::optional<std::span<const double>> reference_out_f64;  // float64 [T, num_q_heads, head_dim]

  double rtol = 1e-3;  // pass when rel L2 vs golden <= rtol; finite, >= 0
  int threads = 0;     // for the oracles; 0: std::thread::hardware_concurrency(). Results do not depend on it
};

// Row keys (the JSON keys of tq validate --json), in the order rows appear.
inline constexpr std::string_view kVsGolden = "vs_golden";
inline constexpr std::string_view kVsF64Dequant = "vs_f64_dequant";
inline constexpr std::string_view kGoldenVsF64Dequant = "golden_vs_f64_dequant";
inline constexpr std::string_view kFormatError = "f64_dequant_vs_f64_original";
inline constexpr std::string_view kVsF64Original = "vs_f64_original";
inline constexpr std::string_view kF64DequantVsReference = "f64_dequant_vs_reference_out_f64";

// One comparison; `cmp` is Comparison(got = first named, want = second named).
//   vs_golden                         output vs the golden model: the kernel error, the pass criterion
//   vs_f64_dequant                    output vs float64 attention over the dequantized cache
//   golden_vs_f64_dequant             the golden model vs that oracle: its own float32 rounding
//   f64_dequant_vs_f64_original       float64 over the dequantized vs the original K/V: the format
//                                     error, the quantization itself (only with `original`)
//   vs_f64_original                   output vs float64 over the original K/V (only with `original`)
//   f64_dequant_vs_reference_out_f64  our oracle vs the case's own float64 oracle (only with it)
struct ValidationRow {
  std::string name;  // "expected_out.npy vs golden"
  std::string key;   // one of the k* keys above
  std::string note;  // "(kernel error)", or empty
  Comparison cmp;
};

struct ValidationReport {
  std::string output_name;
  // query_start_loc was given: comparisons name query rows (Comparison::max_row,
  // worst_row) beside their sequences; the text and JSON then show the row.
  bool multi_row = false;
  double rtol = 0;
  bool pass = false;  // vs_golden().rel_l2 <= rtol; NaN fails
  std::vector<ValidationRow> rows;  // rows[0] is vs_golden
  bool format_error_measured = false;
  std::string original_note;  // why the format error was not measured; empty when it was
  // Non-finite values of the float64 oracle over the dequantized cache: the
  // cache holds NaN/Inf metadata.
  std::int64_t oracle_non_finite = 0;

  const Comparison& vs_golden() const { return rows.front().cmp; }
  // The row with `key`, or null.
  const ValidationRow* row(std::string_view key) const;
  // The format error's comparison, or null when it was not measured.
  const Comparison* format_error() const;
};

// Runs the golden decode and the oracles and fills *report. Bad arguments
// return a Status naming the argument and the value (decode_reference's for
// the decode's; "output has 100 elements but [3, 8, 128] float32 needs 3072").
// A failed comparison is not an error: it is report->pass == false.
Status validate_output(const ValidationInputs& inputs, ValidationReport* report);

// The two lines tq validate prints after "case" (turboquant.validate's repr
// starts with them): the format (`preset` is its name) and the decode call,
// with the query rows, sinks and window of a multi-token call.
//   format   4bit_nc: ...; block_size 16, Hk 2, Hq 8
//   decode   2 sequences, seq_lens 37, 5; 32 splits; scale 0.0883883476; golden = cpu-ref
std::string render_decode_header(const ValidationInputs& inputs, const std::string& preset);
// "1, 37, 300" (the first `limit` values, then ", ..."): how tq's headers list seq_lens.
std::string join_ints(std::span<const std::int32_t> values, std::size_t limit = 8);

// What tq validate prints after its case header: the table, the notes, the
// location of the largest error and the PASS / FAIL line (on FAIL, how the
// kernel error compares with the format's own).
std::string render_report(const ValidationReport& report);

}  // namespace turboquant::checks
