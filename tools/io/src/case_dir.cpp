#include "turboquant/io/case_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "case_meta.hpp"
#include "turboquant/io/npy.hpp"

namespace turboquant::io {
namespace {

namespace fs = std::filesystem;

using detail::invalid;

// ---- shapes ----------------------------------------------------------------

// A size shared by several files (B, N), learnt from the first file that has it.
struct Known {
  std::int64_t value = -1;
  std::string from;
};

// One expected dimension: a fixed value (and why it is expected), a shared
// size, or free.
struct Dim {
  const char* letter;
  std::int64_t fixed = -1;
  std::string why;  // e.g. "head_dim = 64 in meta.json"
  Known* known = nullptr;
};

Dim from_meta(const char* letter, const char* key, std::int64_t value) {
  return Dim{letter, value, std::string(key) + " = " + std::to_string(value) + " in meta.json"};
}

Status check_shape(const std::string& path, const std::vector<std::int64_t>& shape, std::vector<Dim> dims) {
  std::string pattern = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) pattern += (i ? ", " : "") + std::string(dims[i].letter);
  pattern += "]";
  const std::string head = "shape " + format_shape(shape) + " does not match " + pattern + ": ";
  if (shape.size() != dims.size()) {
    return invalid(path, head + std::to_string(shape.size()) + " dimensions, expected " + std::to_string(dims.size()));
  }
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    const std::string got = "dim " + std::to_string(i) + " (" + d.letter + ") = " + std::to_string(shape[i]);
    if (d.fixed >= 0 && shape[i] != d.fixed) {
      return invalid(path, head + got + ", but " + d.why);
    }
    if (d.known && d.known->value >= 0 && shape[i] != d.known->value) {
      return invalid(
          path, head + got + ", but " + d.known->from + " has " + d.letter + " = " + std::to_string(d.known->value));
    }
  }
  const std::string file = fs::path(path).filename().string();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].known && dims[i].known->value < 0) *dims[i].known = Known{shape[i], file};
  }
  return Status();
}

// ---- arrays ----------------------------------------------------------------

// Reads dir/name if `need` says so; `*loaded` is false when it was skipped or
// optional and absent.
Status read_case_file(const CaseDir& c, const char* name, Need need, NpyArray* a, bool* loaded) {
  *loaded = false;
  if (need == Need::kSkip) return Status();
  const std::string path = c.file(name);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return need == Need::kRequired ? invalid(path, "required file is missing") : Status();
  }
  if (Status s = read_npy(path, a); !s.ok()) return s;
  *loaded = true;
  return Status();
}

template <class T>
Status load_typed(const CaseDir& c, const char* name, Need need, Status (*convert)(const NpyArray&, std::vector<T>*),
                  CaseArray<T>* out) {
  *out = CaseArray<T>{};
  NpyArray a;
  bool loaded = false;
  if (Status s = read_case_file(c, name, need, &a, &loaded); !s.ok() || !loaded) return s;
  if (Status s = convert(a, &out->values); !s.ok()) return s;
  out->present = true;
  out->path = a.source;
  out->shape = std::move(a.shape);
  return Status();
}

// Files whose dtype is part of their meaning are read without conversion.
template <class T>
Status exact_dtype(const NpyArray& a, std::vector<T>* out) {
  if (a.dtype != NpyDTypeOf<T>::value) {
    return invalid(a.name(), std::string("dtype ") + npy_dtype_name(a.dtype) + ", expected " +
                                 npy_dtype_name(NpyDTypeOf<T>::value));
  }
  out->resize(a.data.size() / sizeof(T));
  if (!a.data.empty()) std::memcpy(out->data(), a.data.data(), a.data.size());
  return Status();
}

Status centroid_count(const CaseDir& c) {
  const std::int64_t n = c.centroids.shape.size() == 1 ? c.centroids.dim(0) : -1;
  // FP8 keys use no codebook; the case files carry the 4-bit (or 3-bit) table anyway.
  const bool ok = c.format.fp8_keys() ? (n == 8 || n == 16) : n == c.format.key_codebook_size();
  if (ok) return Status();
  const std::vector<std::int64_t> canonical{c.format.key_codebook_size()};
  const std::string want = c.format.fp8_keys() ? "(8,) or (16,)" : format_shape(canonical);
  return invalid(c.centroids.path, "shape " + format_shape(c.centroids.shape) + ", expected " + want + " for " +
                                       c.preset_name + " (key_bits = " + std::to_string(c.format.key_bits) + ")");
}

}  // namespace

std::string CaseDir::file(const std::string& name) const { return (fs::path(path) / name).string(); }

CaseLoadOptions CaseLoadOptions::meta_only() {
  CaseLoadOptions o;
  o.query = o.keys = o.values = o.slot_mapping = o.kv_cache = o.block_table = o.seq_lens = o.centroids =
      o.expected_out = o.expected_lse = o.reference_out_f64 = Need::kSkip;
  return o;
}

CaseLoadOptions CaseLoadOptions::decode() {
  CaseLoadOptions o;
  o.query = o.kv_cache = o.block_table = o.seq_lens = Need::kRequired;
  return o;
}

CaseLoadOptions CaseLoadOptions::encode() {
  CaseLoadOptions o = meta_only();
  o.keys = o.values = o.slot_mapping = Need::kRequired;
  o.kv_cache = o.centroids = Need::kIfPresent;
  return o;
}

CaseLoadOptions CaseLoadOptions::all_required() {
  CaseLoadOptions o;
  o.query = o.keys = o.values = o.slot_mapping = o.kv_cache = o.block_table = o.seq_lens = o.centroids =
      o.expected_out = o.expected_lse = o.reference_out_f64 = Need::kRequired;
  return o;
}

Status load_case(const std::string& dir, const CaseLoadOptions& opt, CaseDir* c) {
  *c = CaseDir{};
  c->path = dir;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return invalid(dir, "no such case directory");
  if (!fs::is_directory(dir, ec)) return invalid(dir, "not a directory (expected a case directory)");
  if (Status s = detail::parse_case_meta(c->file("meta.json"), c); !s.ok()) return s;

  const std::int64_t D = c->head_dim(), Hk = c->num_kv_heads(), Hq = c->num_q_heads, bs = c->block_size();
  Known B, N;
  const Dim dB{"B", -1, "", &B}, dN{"N", -1, "", &N};
  const Dim dD = from_meta("D", "head_dim", D), dHk = from_meta("Hk", "num_kv_heads", Hk),
            dHq = from_meta("Hq", "num_q_heads", Hq);

  // Each entry: load, then check the shape against meta.json and the sizes seen so far.
  const auto load_float = [&](const char* name, Need need, CaseArray<float>* a, std::vector<Dim> dims) {
    if (Status s = load_typed<float>(*c, name, need, to_float32, a); !s.ok() || !a->present) return s;
    return check_shape(a->path, a->shape, std::move(dims));
  };
  const auto load_i32 = [&](const char* name, Need need, CaseArray<std::int32_t>* a, std::vector<Dim> dims) {
    if (Status s = load_typed<std::int32_t>(*c, name, need, to_int32, a); !s.ok() || !a->present) return s;
    return check_shape(a->path, a->shape, std::move(dims));
  };

  // Files and keys a caller that does not honour them must not silently drop.
  if (!opt.rows_sinks_window) {
    if (c->sliding_window != 0) {
      return Status(StatusCode::kUnsupported, c->file("meta.json") + ": sliding_window = " +
                                                  std::to_string(c->sliding_window) +
                                                  ": sliding-window decode is not supported yet");
    }
    for (const char* name : {"query_start_loc.npy", "sinks.npy"}) {
      if (fs::exists(c->file(name), ec)) {
        return Status(StatusCode::kUnsupported,
                      c->file(name) + ": multi-token queries and attention sinks are not supported yet");
      }
    }
  }

  // Multi-token rows: query_start_loc [B + 1] gives B, and the row files have
  // T rows of their own; without it T = B. Loaded whenever present.
  Known T;
  const Dim dT{"T", -1, "", &T};
  const Need optional = opt.rows_sinks_window ? Need::kIfPresent : Need::kSkip;
  if (Status s = load_typed<std::int32_t>(*c, "query_start_loc.npy", optional, to_int32, &c->query_start_loc);
      !s.ok()) {
    return s;
  }
  if (c->query_start_loc.present) {
    if (c->query_start_loc.shape.size() != 1 || c->query_start_loc.dim(0) < 1) {
      return invalid(c->query_start_loc.path, "shape " + format_shape(c->query_start_loc.shape) +
                                                  " does not match [B+1]: expected one dimension of at least 1");
    }
    B = Known{c->query_start_loc.dim(0) - 1, "query_start_loc.npy (B + 1 entries)"};
  }
  const Dim dRows = c->query_start_loc.present ? dT : dB;
  if (Status s = load_float("sinks.npy", optional, &c->sinks, {dHq}); !s.ok()) return s;

  if (Status s = load_float("query.npy", opt.query, &c->query, {dRows, dHq, dD}); !s.ok()) return s;
  if (Status s =
          load_i32("block_table.npy", opt.block_table, &c->block_table, {dB, Dim{"max_blocks", -1, "", nullptr}});
      !s.ok()) {
    return s;
  }
  if (Status s = load_i32("seq_lens.npy", opt.seq_lens, &c->seq_lens, {dB}); !s.ok()) return s;
  if (Status s = load_float("expected_out.npy", opt.expected_out, &c->expected_out, {dRows, dHq, dD}); !s.ok())
    return s;
  if (Status s = load_float("expected_lse.npy", opt.expected_lse, &c->expected_lse, {dRows, dHq}); !s.ok()) return s;
  if (Status s = load_typed<double>(*c, "reference_out_f64.npy", opt.reference_out_f64, exact_dtype<double>,
                                    &c->reference_out_f64);
      !s.ok()) {
    return s;
  }
  if (c->reference_out_f64.present) {
    if (Status s = check_shape(c->reference_out_f64.path, c->reference_out_f64.shape, {dRows, dHq, dD}); !s.ok())
      return s;
  }

  if (Status s = load_float("keys.npy", opt.keys, &c->keys, {dN, dHk, dD}); !s.ok()) return s;
  if (Status s = load_float("values.npy", opt.values, &c->values, {dN, dHk, dD}); !s.ok()) return s;
  if (Status s = load_typed<std::int64_t>(*c, "slot_mapping.npy", opt.slot_mapping, to_int64, &c->slot_mapping);
      !s.ok()) {
    return s;
  }
  if (c->slot_mapping.present) {
    if (Status s = check_shape(c->slot_mapping.path, c->slot_mapping.shape, {dN}); !s.ok()) return s;
  }

  if (Status s = load_typed<std::uint8_t>(*c, "kv_cache.npy", opt.kv_cache, exact_dtype<std::uint8_t>, &c->kv_cache);
      !s.ok()) {
    return s;
  }
  if (c->kv_cache.present) {
    const std::int64_t slot_bytes = c->format.slot_bytes_aligned();
    const Dim slot{"slot_bytes", slot_bytes,
                   c->preset_name + " at head_dim = " + std::to_string(D) + " stores " + std::to_string(slot_bytes)};
    if (Status s =
            check_shape(c->kv_cache.path, c->kv_cache.shape,
                        {Dim{"num_blocks", -1, "", nullptr}, from_meta("block_size", "block_size", bs), dHk, slot});
        !s.ok()) {
      return s;
    }
  }

  if (Status s = load_float("centroids.npy", opt.centroids, &c->centroids, {Dim{"codebook", -1, "", nullptr}}); !s.ok())
    return s;
  if (c->centroids.present) {
    if (Status s = centroid_count(*c); !s.ok()) return s;
  }

  c->batch = B.value;
  c->num_query_rows = c->query_start_loc.present ? T.value : B.value;
  c->num_tokens = N.value;
  c->num_blocks = c->kv_cache.present ? c->kv_cache.dim(0) : -1;
  c->max_blocks_per_seq = c->block_table.present ? c->block_table.dim(1) : -1;
  return Status();
}

Status load_float_array(const std::string& path, CaseArray<float>* out) {
  *out = CaseArray<float>{};
  NpyArray a;
  if (Status s = read_npy(path, &a); !s.ok()) return s;
  if (Status s = to_float32(a, &out->values); !s.ok()) return s;
  out->present = true;
  out->path = path;
  out->shape = std::move(a.shape);
  return Status();
}

Status load_case_output(const CaseDir& c, const std::string& file, CaseArray<float>* out) {
  std::error_code ec;
  std::string path = file;
  for (const std::string& candidate : {file, c.file(file), c.file(file + ".npy")}) {
    if (fs::exists(candidate, ec)) {
      path = candidate;
      break;
    }
  }
  if (!fs::exists(path, ec)) return invalid(file, "no such file (also looked in " + c.path + ")");
  if (Status s = load_float_array(path, out); !s.ok()) return s;
  Known T{c.num_query_rows, "the case"};
  return check_shape(
      path, out->shape,
      {Dim{"T", -1, "", &T}, from_meta("Hq", "num_q_heads", c.num_q_heads), from_meta("D", "head_dim", c.head_dim())});
}

ConstCacheView case_cache(const CaseDir& c) { return ConstCacheView(c.layout, c.kv_cache.data(), c.num_blocks); }

DecodeArgs case_decode_args(const CaseDir& c, const Codebook* codebook, int splits, std::vector<float>* out,
                            std::vector<float>* lse, float fill) {
  const std::size_t rows = static_cast<std::size_t>(c.num_query_rows) * c.num_q_heads;
  out->assign(rows * c.head_dim(), fill);
  DecodeArgs a;
  a.query = {c.query.data(), c.query.size() * sizeof(float)};
  a.batch = static_cast<int>(c.batch);
  a.num_q_heads = c.num_q_heads;
  a.block_table = {c.block_table.data(), c.block_table.size() * sizeof(std::int32_t)};
  a.max_blocks_per_seq = static_cast<int>(c.max_blocks_per_seq);
  a.seq_lens = {c.seq_lens.data(), c.seq_lens.size() * sizeof(std::int32_t)};
  a.softmax_scale = static_cast<float>(c.scale);
  a.num_splits = splits;
  a.out = {out->data(), out->size() * sizeof(float)};
  if (lse != nullptr) {
    lse->assign(rows, fill);
    a.lse = {lse->data(), lse->size() * sizeof(float)};
  }
  a.codebook = codebook;
  if (c.query_start_loc.present) {
    a.query_start_loc = {c.query_start_loc.data(), c.query_start_loc.size() * sizeof(std::int32_t)};
    a.num_query_rows = static_cast<int>(c.num_query_rows);
  }
  if (c.sinks.present) a.sinks = {c.sinks.data(), c.sinks.size() * sizeof(float)};
  a.sliding_window = c.sliding_window;
  return a;
}

EncodeArgs case_encode_args(const CaseDir& c, const Codebook* codebook) {
  EncodeArgs e;
  e.keys = {c.keys.data(), c.keys.size() * sizeof(float)};
  e.values = {c.values.data(), c.values.size() * sizeof(float)};
  e.num_tokens = c.num_tokens;
  e.slot_mapping = {c.slot_mapping.data(), c.slot_mapping.size() * sizeof(std::int64_t)};
  e.codebook = codebook;
  return e;
}

}  // namespace turboquant::io
