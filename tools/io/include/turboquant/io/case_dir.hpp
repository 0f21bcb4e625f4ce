// A case directory (see tests/data/vllm-soa and its README): meta.json plus
// .npy arrays describing one decode (and the store that preceded it).
// load_case reads the files a command needs and checks that every array's
// dtype and shape agree with meta.json and with each other, naming the file
// and the value that disagrees. Contents (block ids, seq_len ranges, slot
// ranges) are not checked here: the library's own validation does that.
//
// Shape letters: B sequences, T query rows (B without query_start_loc.npy,
// else query_start_loc[B]), Hq query heads, Hk KV heads, D head_dim, N stored
// tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/format.hpp"
#include "turboquant/status.hpp"

namespace turboquant::io {

// A typed array from a case file, in C order.
template <class T>
struct CaseArray {
  bool present = false;  // the file was found and loaded
  std::string path;
  std::vector<std::int64_t> shape;
  std::vector<T> values;

  std::int64_t dim(int i) const { return shape.at(static_cast<std::size_t>(i)); }
  std::size_t size() const { return values.size(); }
  const T* data() const { return values.data(); }
};

struct CaseDir {
  std::string path;

  // meta.json
  std::string preset_name;  // as written, e.g. "turboquant_4bit_nc"
  Preset preset = Preset::k4BitNc;
  Format format;
  BlockLayout layout;  // format + block_size + num_kv_heads, validated
  int num_q_heads = 0;
  double scale = 0.0;
  int num_kv_splits = 32;  // optional in meta.json
  std::string source;      // optional in meta.json
  int sliding_window = 0;  // optional in meta.json ("sliding_window": W >= 1); 0: none

  int head_dim() const { return format.head_dim; }
  int block_size() const { return layout.block_size; }
  int num_kv_heads() const { return layout.num_kv_heads; }

  // Arrays; each is present only if it was loaded. Integer and float files
  // are converted to the types below (float16/float64 -> float, int32/int64
  // -> int32 or int64 where the value fits).
  CaseArray<float> query;                // [T, Hq, D]
  CaseArray<float> keys;                 // [N, Hk, D]
  CaseArray<float> values;               // [N, Hk, D]
  CaseArray<std::int64_t> slot_mapping;  // [N]
  CaseArray<std::uint8_t> kv_cache;      // [num_blocks, block_size, Hk, slot_bytes_aligned], raw bytes
  CaseArray<std::int32_t> block_table;   // [B, max_blocks]
  CaseArray<std::int32_t> seq_lens;      // [B]
  CaseArray<float> centroids;            // [2^key_bits] (for FP8 keys: the 4-bit table, 16)
  CaseArray<float> expected_out;         // [T, Hq, D]
  CaseArray<float> expected_lse;         // [T, Hq]
  CaseArray<double> reference_out_f64;   // [T, Hq, D], float64 only
  // Optional files, loaded whenever present when the caller opts in
  // (CaseLoadOptions::rows_sinks_window); otherwise their presence is an error.
  CaseArray<std::int32_t> query_start_loc;  // [B + 1]; contents checked by validate_decode
  CaseArray<float> sinks;                   // [Hq]

  // Sizes taken from the loaded arrays; -1 where no loaded array has them.
  std::int64_t batch = -1;               // B
  std::int64_t num_query_rows = -1;      // T (= B without query_start_loc.npy)
  std::int64_t num_tokens = -1;          // N
  std::int64_t num_blocks = -1;          // kv_cache dim 0
  std::int64_t max_blocks_per_seq = -1;  // block_table dim 1

  // Whether the case has multi-token rows, sinks or a sliding window.
  bool multi_token_or_sinks_or_window() const {
    return query_start_loc.present || sinks.present || sliding_window != 0;
  }

  // dir/name
  std::string file(const std::string& name) const;
};

// Which files load_case reads. kIfPresent loads a file when it exists (and
// checks it like a required one); kSkip never opens it.
enum class Need : std::uint8_t { kSkip, kIfPresent, kRequired };

struct CaseLoadOptions {
  Need query = Need::kIfPresent;
  Need keys = Need::kIfPresent;
  Need values = Need::kIfPresent;
  Need slot_mapping = Need::kIfPresent;
  Need kv_cache = Need::kIfPresent;
  Need block_table = Need::kIfPresent;
  Need seq_lens = Need::kIfPresent;
  Need centroids = Need::kIfPresent;
  Need expected_out = Need::kIfPresent;
  Need expected_lse = Need::kIfPresent;
  Need reference_out_f64 = Need::kIfPresent;
  // The caller honours query_start_loc.npy, sinks.npy and "sliding_window"
  // (case_decode_args passes them on): they are loaded whenever present,
  // whatever the Need fields say. false: a case that has any of them is
  // refused with kUnsupported, never decoded as one token per sequence (tq and
  // the Python package until they size their rows by T).
  bool rows_sinks_window = false;

  // meta.json only.
  static CaseLoadOptions meta_only();
  // A decode needs query, kv_cache, block_table and seq_lens; the rest is loaded if present.
  static CaseLoadOptions decode();
  // An encode (store) needs keys, values and slot_mapping; kv_cache is loaded if
  // present (to compare against), the decode outputs are skipped.
  static CaseLoadOptions encode();
  // Every file of the README table except vllm_v2_out.npy.
  static CaseLoadOptions all_required();
};

// meta.json is always required. On error the message names the file and the
// offending value; `*out` is then unspecified.
Status load_case(const std::string& dir, const CaseLoadOptions& options, CaseDir* out);

// Loads a float output [T, Hq, D] to compare against (tq validate --output FILE):
// `file` is a path, or a name inside the case directory with or without ".npy"
// (e.g. "vllm_v2_out"). Its shape is checked against Hq, D and, when known, T.
Status load_case_output(const CaseDir& c, const std::string& file, CaseArray<float>* out);

// The case's cache as a view (kv_cache must be loaded).
ConstCacheView case_cache(const CaseDir& c);

// Decode arguments for the case's query, block table, seq_lens and (when
// present) query_start_loc, sinks and sliding_window, writing fp32 out
// [T, Hq, D] into *out and, when lse is non-null, [T, Hq] into *lse (both
// resized and filled with `fill`, e.g. a canary).
DecodeArgs case_decode_args(const CaseDir& c, const Codebook* codebook, int splits, std::vector<float>* out,
                            std::vector<float>* lse, float fill = 0.0f);

// Encode arguments for the case's keys, values and slot_mapping (fp32 K/V;
// keys, values and slot_mapping must be loaded).
EncodeArgs case_encode_args(const CaseDir& c, const Codebook* codebook);

// Any float .npy file as float32 (float16/float64 converted), shape unchecked.
Status load_float_array(const std::string& path, CaseArray<float>* out);

}  // namespace turboquant::io
