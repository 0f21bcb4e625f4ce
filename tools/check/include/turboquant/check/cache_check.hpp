// Is this cache what a store of these K/V should have written? validate_cache
// re-encodes the original K/V with the golden model (encode_reference) into a
// zeroed cache and classifies every element of the cache under test (another
// producer's store kernel: vLLM's Triton store, a CUDA kernel) against it:
//   identical;
//   boundary flip: a key or value code one step off where the exact (double)
//     quantity lies within boundary_ulps of the decision boundary between the
//     two codes (approximate division, a dense rotation: ARITHMETIC.md §4a);
//   one ulp: an fp16 norm, scale or zero one binary16 step off;
//   wrong: anything else, named by block, position, KV head, field and dim.
// `tq validate CASE --cache FILE` and the Python package are this function.
// Plain C++: every array is a span over host memory, no JSON or CLI types.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/check/validate.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/core/boundary.hpp"
#include "turboquant/status.hpp"

namespace turboquant::checks {

// The parts of a cache a classification is about. kUntouched: a byte of no
// written slot (an unwritten slot, a block the store never touched, padding),
// which must equal the golden cache's (0: the golden cache starts zeroed).
enum class CacheField : std::uint8_t {
  kKeyCodes,    // Lloyd-Max key codes, one per dim
  kKeyNorm,     // fp16 key norm (Lloyd-Max keys)
  kFp8Key,      // FP8 key bytes, one per dim
  kValueCodes,  // value codes, one per dim
  kValueScale,  // fp16 value scale
  kValueZero,   // fp16 value zero
  kUntouched,   // bytes outside every written slot
};
inline constexpr int kCacheFieldCount = 7;
inline constexpr CacheField kAllCacheFields[] = {CacheField::kKeyCodes,   CacheField::kKeyNorm,
                                                 CacheField::kFp8Key,     CacheField::kValueCodes,
                                                 CacheField::kValueScale, CacheField::kValueZero,
                                                 CacheField::kUntouched};
// "key codes", "key norm", "FP8 key bytes", ..., "untouched bytes".
const char* cache_field_name(CacheField f);
// JSON keys: "key_codes", "key_norm", "fp8_key", "value_codes", "value_scale", "value_zero", "untouched".
std::string_view cache_field_key(CacheField f);
// What one counted element of the field is: "code", "fp16", "byte".
const char* cache_field_unit(CacheField f);
// Whether a format has the field (FP8 keys: no key codes or norm; Lloyd-Max: no FP8 bytes).
bool cache_field_applies(const Format& f, CacheField field);

struct CacheCheckInputs {
  ConstCacheView cache;                // the cache under test: its layout (format, block_size, Hk) and bytes
  const Codebook* codebook = nullptr;  // Lloyd-Max keys: null = vllm_codebook(head_dim, key_bits)
  std::span<const float> rotation;     // optional dense PiT float32 [D, D]; empty: Hadamard
  OriginalKV original;                 // the K/V the store was given (slot_mapping < 0 skips a token)
  std::string cache_name = "cache";    // how the report names the cache ("kv_cache.npy")
  double boundary_ulps = core::kBoundaryFlipUlps;  // the flip bound; finite, >= 0
  int max_report = 20;                 // wrong elements listed (all are counted); >= 0
};

// Counts of one field, in its unit (codes, fp16 fields, bytes).
struct CacheFieldCounts {
  std::int64_t identical = 0;
  std::int64_t boundary_flip = 0;  // codes only
  std::int64_t one_ulp = 0;        // fp16 fields only
  std::int64_t wrong = 0;
  double worst_flip_ulps = 0;  // the largest boundary distance among the accepted flips
};

// One wrong element, where it is and what it holds.
struct CacheItem {
  std::int64_t block = 0;
  int position = -1;  // token slot in the block; -1: padding of no slot
  int head = -1;      // KV head; -1: padding of no slot
  CacheField field = CacheField::kUntouched;
  // kUntouched: the field of the unwritten slot the byte belongs to (kUntouched for padding).
  CacheField within = CacheField::kUntouched;
  int dim = -1;                 // codes and FP8 bytes: the dim; kUntouched: the byte within its field; fp16: -1
  std::int64_t byte_offset = 0;  // in the cache, of the element's (first) byte
  std::int64_t token = -1;       // the slot_mapping index that wrote the slot; -1 for kUntouched
  int golden = 0;                // codes: the code; fp16 fields: the bits; bytes: the byte
  int got = 0;                   // the same, in the cache under test
  double boundary_ulps = -1;     // one-step codes: distance of the exact quantity to the boundary; else -1
};

struct CacheReport {
  std::string cache_name;
  Format format;
  std::int64_t num_blocks = 0;
  std::int64_t tokens = 0;         // tokens stored (slot_mapping >= 0)
  std::int64_t written_slots = 0;  // (token, KV head) slots written
  double boundary_ulps = 0;        // the bound applied
  std::vector<CacheFieldCounts> counts = std::vector<CacheFieldCounts>(kCacheFieldCount);  // by CacheField
  std::int64_t wrong = 0;           // all wrong elements
  std::vector<CacheItem> wrong_items;  // the first max_report, in cache order (block, position, head)
  bool pass = false;                   // wrong == 0

  const CacheFieldCounts& at(CacheField f) const { return counts[static_cast<std::size_t>(f)]; }
  CacheFieldCounts& at(CacheField f) { return counts[static_cast<std::size_t>(f)]; }
};

// Re-encodes `original` into a zeroed cache of inputs.cache's size and fills
// *report. Bad arguments return a Status naming the argument and the value
// (encode_reference's for the K/V and slot_mapping); a wrong element is not an
// error: it is report->pass == false.
Status validate_cache(const CacheCheckInputs& inputs, CacheReport* report);

// "block 3 position 5 head 1 key codes dim 17: golden 5, cache 6 (12.3 ulps from the boundary)".
std::string describe_item(const CacheItem& item);

// What tq validate --cache prints after its case header: the counts table, the
// first wrong elements and the PASS / FAIL line.
std::string render_cache_report(const CacheReport& report);

}  // namespace turboquant::checks
