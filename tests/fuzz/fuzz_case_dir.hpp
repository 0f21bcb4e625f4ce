// Fuzz target: the case-directory loader (turboquant::io::load_case) and,
// when a case loads, the library calls tq makes on it (validate, decode,
// encode with the golden model). The input is a list of files:
//   repeat { u8 file index (mod kFiles), u32 LE length, that many bytes }
// written into a private temporary directory; a length past the end takes
// the rest. Invariants: no crash, no sanitizer report, one-line messages that
// start with the offending path.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "turboquant/io/case_dir.hpp"
#include "turboquant/turboquant.hpp"

namespace tq_fuzz {

inline constexpr const char* kCaseFiles[] = {
    "meta.json",    "query.npy",        "block_table.npy",  "seq_lens.npy",  "kv_cache.npy",
    "keys.npy",     "values.npy",       "slot_mapping.npy", "centroids.npy", "expected_out.npy",
    "expected_lse.npy", "reference_out_f64.npy"};
inline constexpr int kFiles = sizeof(kCaseFiles) / sizeof(kCaseFiles[0]);

// Serializes files into the target's input format (used by the seed generator
// and the regression tests).
inline std::vector<std::uint8_t> case_input(const std::vector<std::pair<int, std::vector<std::uint8_t>>>& files) {
  std::vector<std::uint8_t> out;
  for (const auto& [index, bytes] : files) {
    out.push_back(static_cast<std::uint8_t>(index));
    const auto n = static_cast<std::uint32_t>(bytes.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

inline const std::filesystem::path& fuzz_case_root() {
  static const std::filesystem::path root = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tq_fuzz_case_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) fail("case_dir: mkdtemp failed");
    return std::filesystem::path(tmpl);
  }();
  return root;
}

inline bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

// What tq does with a loaded case: decode and encode with the golden model.
// Work is capped so that one input stays fast; only the validation runs on
// bigger problems.
inline void run_case(const turboquant::io::CaseDir& c) {
  using namespace turboquant;
  std::unique_ptr<Codebook> codebook;
  if (c.centroids.present && !c.format.fp8_keys()) {
    codebook = std::make_unique<Codebook>();
    if (!make_codebook(c.format.key_bits, c.centroids.values, codebook.get()).ok()) return;
  }
  if (c.query.present && c.kv_cache.present && c.block_table.present && c.seq_lens.present) {
    const ConstCacheView cache(c.layout, c.kv_cache.data(), c.num_blocks);
    std::vector<float> out, lse;
    const DecodeArgs a = io::case_decode_args(c, codebook.get(), c.num_kv_splits, &out, &lse, -3.0f);
    const Status v = validate_decode(cache, a);
    if (!one_line(v.message())) fail("case_dir: decode validation message spans lines");
    std::int64_t work = 0;
    for (std::int32_t len : c.seq_lens.values) work += std::int64_t{len > 0 ? len : 0};
    work *= std::int64_t{c.num_q_heads} * c.head_dim();
    if (v.ok() && work <= (std::int64_t{1} << 22)) {
      if (!decode_reference(cache, a).ok()) fail("case_dir: validated decode failed");
    }
  }
  if (c.keys.present && c.values.present && c.slot_mapping.present && c.kv_cache.present) {
    std::vector<std::uint8_t> cache_bytes = c.kv_cache.values;
    const CacheView cache{c.layout, cache_bytes.data(), c.num_blocks};
    const EncodeArgs e = io::case_encode_args(c, codebook.get());
    const Status v = validate_encode(cache, e);
    if (!one_line(v.message())) fail("case_dir: encode validation message spans lines");
    if (v.ok() && c.num_tokens * c.num_kv_heads() * c.head_dim() <= (std::int64_t{1} << 22)) {
      if (!encode_reference(cache, e).ok()) fail("case_dir: validated encode failed");
    }
  }
}

inline int fuzz_case_dir(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  namespace io = turboquant::io;
  const fs::path dir = fuzz_case_root() / "case";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  Input in(data, size);
  while (in.remaining() > 0) {
    const int index = in.u8() % kFiles;
    const std::size_t len = in.u32();
    const std::size_t n = len < in.remaining() ? len : in.remaining();
    std::ofstream(dir / kCaseFiles[index], std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(in.here()), static_cast<std::streamsize>(n));
    in.skip(n);
  }
  const io::CaseLoadOptions options[] = {io::CaseLoadOptions::decode(), io::CaseLoadOptions::encode(),
                                         io::CaseLoadOptions{}};
  for (const io::CaseLoadOptions& o : options) {
    io::CaseDir c;
    const turboquant::Status s = io::load_case(dir.string(), o, &c);
    if (!s.ok()) {
      if (!one_line(s.message())) fail("case_dir: load_case message spans lines");
      if (s.message().find(dir.string()) != 0) fail("case_dir: load_case message does not start with a path");
      continue;
    }
    run_case(c);
  }
  return 0;
}

}  // namespace tq_fuzz
