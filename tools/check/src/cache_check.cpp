// validate_cache: every element of a cache against the golden model's store of
// the same K/V (ARITHMETIC.md §4a for the flip criterion). Offsets come from
// BlockLayout, codes from core's packing, the exact quantities from
// core/boundary.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "text.hpp"
#include "turboquant/check/cache_check.hpp"
#include "turboquant/core/token_codec.hpp"
#include "turboquant/detail/validate.hpp"
#include "turboquant/encode.hpp"

namespace turboquant::checks {

namespace {

using core::MetaField;

// One field of a slot: where its bytes are inside the block.
struct FieldSpan {
  CacheField field;
  std::int64_t offset;
  int bytes;
};

// The fields of slot (t, h), in slot order, all from the layout.
int slot_fields(const BlockLayout& l, int t, int h, FieldSpan* out) {
  const Format& f = l.format;
  int n = 0;
  out[n++] = {f.fp8_keys() ? CacheField::kFp8Key : CacheField::kKeyCodes, l.key_data_offset(t, h), f.key_data_bytes()};
  if (!f.fp8_keys()) out[n++] = {CacheField::kKeyNorm, l.meta_field_offset(t, h, MetaField::kKeyNorm), 2};
  out[n++] = {CacheField::kValueCodes, l.value_data_offset(t, h), f.value_data_bytes()};
  out[n++] = {CacheField::kValueScale, l.meta_field_offset(t, h, MetaField::kValueScale), 2};
  out[n++] = {CacheField::kValueZero, l.meta_field_offset(t, h, MetaField::kValueZero), 2};
  return n;
}

std::uint16_t fp16_at(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// An fp16 field one binary16 step (or only the sign of a zero) apart.
bool one_fp16_step(std::uint16_t a, std::uint16_t b) {
  const int steps = core::fp16_steps_apart(a, b);
  return steps == 0 || steps == 1;
}

class Checker {
 public:
  Checker(const CacheCheckInputs& in, const std::vector<std::uint8_t>& golden, const Codebook* codebook,
          core::Rotation rotation, CacheReport* report)
      : in_(in),
        l_(in.cache.layout),
        f_(l_.format),
        got_(in.cache.data),
        gold_(golden.data()),
        cb_(codebook),
        rot_(rotation),
        r_(*report) {}

  void block(std::int64_t b, const std::vector<std::int64_t>& slot_token, const std::vector<std::uint8_t>& covered) {
    const std::int64_t base = l_.block_base(b);
    for (int t = 0; t < l_.block_size; ++t) {
      const std::int64_t token = slot_token[static_cast<std::size_t>(b * l_.block_size + t)];
      for (int h = 0; h < l_.num_kv_heads; ++h) {
        if (token >= 0) {
          written_slot(b, base, t, h, token);
        } else {
          untouched_slot(b, base, t, h);
        }
      }
    }
    for (std::int64_t i = 0; i < l_.block_bytes(); ++i) {
      if (covered[static_cast<std::size_t>(i)]) continue;
      CacheItem it = item(b, -1, -1, CacheField::kUntouched, -1, base + i, -1);
      untouched_byte(it);
    }
  }

 private:
  CacheItem item(std::int64_t b, int t, int h, CacheField field, int dim, std::int64_t at, std::int64_t token) const {
    CacheItem it;
    it.block = b;
    it.position = t;
    it.head = h;
    it.field = field;
    it.dim = dim;
    it.byte_offset = at;
    it.token = token;
    return it;
  }

  void wrong(const CacheItem& it) {
    ++r_.wrong;
    ++r_.at(it.field).wrong;
    if (static_cast<std::int64_t>(r_.wrong_items.size()) < in_.max_report) r_.wrong_items.push_back(it);
  }

  void flip(CacheField field, double ulps) {
    CacheFieldCounts& c = r_.at(field);
    ++c.boundary_flip;
    c.worst_flip_ulps = std::max(c.worst_flip_ulps, ulps);
  }

  void untouched_byte(CacheItem& it) {
    it.golden = gold_[it.byte_offset];
    it.got = got_[it.byte_offset];
    if (it.golden == it.got) {
      ++r_.at(CacheField::kUntouched).identical;
    } else {
      wrong(it);
    }
  }

  void untouched_slot(std::int64_t b, std::int64_t base, int t, int h) {
    FieldSpan fields[5];
    const int n = slot_fields(l_, t, h, fields);
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < fields[i].bytes; ++k) {
        CacheItem it = item(b, t, h, CacheField::kUntouched, k, base + fields[i].offset + k, -1);
        it.within = fields[i].field;
        untouched_byte(it);
      }
    }
  }

  void written_slot(std::int64_t b, std::int64_t base, int t, int h, std::int64_t token) {
    const int D = f_.head_dim;
    const std::int64_t row = (token * l_.num_kv_heads + h) * D;  // [N, Hk, D] input rows
    const float* k = in_.original.keys.data() + row;
    const float* v = in_.original.values.data() + row;
    const std::int64_t key_at = base + l_.key_data_offset(t, h);
    std::uint8_t got_codes[core::kMaxHeadDim];
    bool key_codes_differ = false;
    if (f_.fp8_keys()) {
      for (int d = 0; d < D; ++d) {
        CacheItem it = item(b, t, h, CacheField::kFp8Key, d, key_at + d, token);
        it.golden = gold_[key_at + d];
        it.got = got_[key_at + d];
        if (it.golden == it.got) {
          ++r_.at(CacheField::kFp8Key).identical;
        } else {
          wrong(it);
        }
      }
    } else {
      double y[core::kMaxHeadDim];
      bool have_y = false;
      for (int d = 0; d < D; ++d) {
        const int x = core::unpack_code(f_.key_bits, gold_ + key_at, d);
        const int w = core::unpack_code(f_.key_bits, got_ + key_at, d);
        got_codes[d] = static_cast<std::uint8_t>(w);
        if (x == w) {
          ++r_.at(CacheField::kKeyCodes).identical;
          continue;
        }
        key_codes_differ = true;
        CacheItem it = item(b, t, h, CacheField::kKeyCodes, d, key_at, token);
        it.golden = x;
        it.got = w;
        if (std::abs(x - w) == 1) {
          if (!have_y) core::exact_rotated_direction(rot_, k, D, y);
          have_y = true;
          it.boundary_ulps = core::key_boundary_ulps(y[d], cb_->midpoints[std::min(x, w)], D);
          if (it.boundary_ulps <= in_.boundary_ulps) {
            flip(CacheField::kKeyCodes, it.boundary_ulps);
            continue;
          }
        }
        wrong(it);
      }
      key_norm(b, base, t, h, token, k, key_codes_differ ? got_codes : nullptr);
    }

    const std::int64_t value_at = base + l_.value_data_offset(t, h);
    const core::ValueParams vp = core::value_params(v, D, f_.value_bits);
    for (int d = 0; d < D; ++d) {
      const int x = core::unpack_code(f_.value_bits, gold_ + value_at, d);
      const int w = core::unpack_code(f_.value_bits, got_ + value_at, d);
      if (x == w) {
        ++r_.at(CacheField::kValueCodes).identical;
        continue;
      }
      CacheItem it = item(b, t, h, CacheField::kValueCodes, d, value_at, token);
      it.golden = x;
      it.got = w;
      if (std::abs(x - w) == 1) {
        it.boundary_ulps = core::value_boundary_ulps(v[d], vp, std::min(x, w));
        if (it.boundary_ulps <= in_.boundary_ulps) {
          flip(CacheField::kValueCodes, it.boundary_ulps);
          continue;
        }
      }
      wrong(it);
    }
    fp16_field(b, base, t, h, token, MetaField::kValueScale, CacheField::kValueScale, -1);
    fp16_field(b, base, t, h, token, MetaField::kValueZero, CacheField::kValueZero, -1);
  }

  // `alternative`: a second acceptable value's bits, or -1.
  void fp16_field(std::int64_t b, std::int64_t base, int t, int h, std::int64_t token, MetaField m, CacheField field,
                  int alternative) {
    const std::int64_t at = base + l_.meta_field_offset(t, h, m);
    CacheItem it = item(b, t, h, field, -1, at, token);
    it.golden = fp16_at(gold_ + at);
    it.got = fp16_at(got_ + at);
    const auto got = static_cast<std::uint16_t>(it.got);
    if (it.golden == it.got || alternative == it.got) {
      ++r_.at(field).identical;
    } else if (one_fp16_step(static_cast<std::uint16_t>(it.golden), got) ||
               (alternative >= 0 && one_fp16_step(static_cast<std::uint16_t>(alternative), got))) {
      ++r_.at(field).one_ulp;
    } else {
      wrong(it);
    }
  }

  // The stored norm follows the key codes when the layout folds the norm
  // correction at store (SoA): after accepted code flips the norm of the
  // cache's own codes is as right as the golden one.
  void key_norm(std::int64_t b, std::int64_t base, int t, int h, std::int64_t token, const float* k,
                const std::uint8_t* got_codes) {
    int alternative = -1;
    if (got_codes != nullptr && f_.norm_folded_at_store()) {
      const int D = f_.head_dim;
      float c[core::kMaxHeadDim];
      for (int d = 0; d < D; ++d) c[d] = cb_->centroids[got_codes[d]];
      const float norm = core::key_denominator(core::dot16(k, k, D)).norm;
      alternative = core::float_to_fp16_clamped(core::stored_key_norm(norm, c, D, true));
    }
    fp16_field(b, base, t, h, token, MetaField::kKeyNorm, CacheField::kKeyNorm, alternative);
  }

  const CacheCheckInputs& in_;
  const BlockLayout& l_;
  const Format& f_;
  const std::uint8_t* got_;
  const std::uint8_t* gold_;
  const Codebook* cb_;
  core::Rotation rot_;
  CacheReport& r_;
};

}  // namespace

const char* cache_field_name(CacheField f) {
  switch (f) {
    case CacheField::kKeyCodes: return "key codes";
    case CacheField::kKeyNorm: return "key norm";
    case CacheField::kFp8Key: return "FP8 key bytes";
    case CacheField::kValueCodes: return "value codes";
    case CacheField::kValueScale: return "value scale";
    case CacheField::kValueZero: return "value zero";
    case CacheField::kUntouched: return "untouched bytes";
  }
  return "?";
}

std::string_view cache_field_key(CacheField f) {
  switch (f) {
    case CacheField::kKeyCodes: return "key_codes";
    case CacheField::kKeyNorm: return "key_norm";
    case CacheField::kFp8Key: return "fp8_key";
    case CacheField::kValueCodes: return "value_codes";
    case CacheField::kValueScale: return "value_scale";
    case CacheField::kValueZero: return "value_zero";
    case CacheField::kUntouched: return "untouched";
  }
  return "?";
}

const char* cache_field_unit(CacheField f) {
  switch (f) {
    case CacheField::kKeyCodes:
    case CacheField::kValueCodes: return "code";
    case CacheField::kKeyNorm:
    case CacheField::kValueScale:
    case CacheField::kValueZero: return "fp16";
    case CacheField::kFp8Key:
    case CacheField::kUntouched: return "byte";
  }
  return "?";
}

bool cache_field_applies(const Format& f, CacheField field) {
  if (field == CacheField::kKeyCodes || field == CacheField::kKeyNorm) return !f.fp8_keys();
  if (field == CacheField::kFp8Key) return f.fp8_keys();
  return true;
}

Status validate_cache(const CacheCheckInputs& in, CacheReport* report) {
  if (report == nullptr) return Status(StatusCode::kInvalidArgument, "report is null");
  if (!(in.boundary_ulps >= 0) || !std::isfinite(in.boundary_ulps)) {
    return Status(StatusCode::kInvalidArgument,
                  internal::sprintf_string("boundary_ulps = %g: must be a finite number >= 0", in.boundary_ulps));
  }
  if (in.max_report < 0) {
    return Status(StatusCode::kInvalidArgument, "max_report = " + std::to_string(in.max_report) + ": must be >= 0");
  }
  if (Status s = detail::validate_cache(in.cache); !s.ok()) return s;
  const BlockLayout& l = in.cache.layout;
  const ConstBuffer rotation{in.rotation.data(), in.rotation.size_bytes()};
  detail::Tables tables;
  if (Status s = detail::resolve_tables(l.format, in.codebook, rotation, &tables); !s.ok()) return s;

  // The golden store into a zeroed cache of the same size (checks K/V, slots).
  const OriginalKV& o = in.original;
  std::vector<std::uint8_t> golden(static_cast<std::size_t>(in.cache.bytes()), 0);
  EncodeArgs e;
  e.keys = {o.keys.data(), o.keys.size_bytes()};
  e.values = {o.values.data(), o.values.size_bytes()};
  e.num_tokens = static_cast<std::int64_t>(o.slot_mapping.size());
  e.slot_mapping = {o.slot_mapping.data(), o.slot_mapping.size_bytes()};
  e.codebook = tables.codebook;
  e.rotation = rotation;
  if (Status s = encode_reference(CacheView{l, golden.data(), in.cache.num_blocks}, e); !s.ok()) return s;

  CacheReport& r = *report;
  r = CacheReport{};
  r.cache_name = in.cache_name;
  r.format = l.format;
  r.num_blocks = in.cache.num_blocks;
  r.boundary_ulps = in.boundary_ulps;
  // Which token wrote each slot (encode_reference rejected shared and out-of-range slots).
  std::vector<std::int64_t> slot_token(static_cast<std::size_t>(in.cache.num_blocks * l.block_size), -1);
  for (std::size_t i = 0; i < o.slot_mapping.size(); ++i) {
    if (o.slot_mapping[i] < 0) continue;
    slot_token[static_cast<std::size_t>(o.slot_mapping[i])] = static_cast<std::int64_t>(i);
    ++r.tokens;
  }
  r.written_slots = r.tokens * l.num_kv_heads;
  // Bytes of a block that belong to some slot's field; the rest is padding.
  std::vector<std::uint8_t> covered(static_cast<std::size_t>(l.block_bytes()), 0);
  for (int t = 0; t < l.block_size; ++t) {
    for (int h = 0; h < l.num_kv_heads; ++h) {
      FieldSpan fields[5];
      const int n = slot_fields(l, t, h, fields);
      for (int i = 0; i < n; ++i) {
        std::fill_n(covered.begin() + fields[i].offset, fields[i].bytes, std::uint8_t{1});
      }
    }
  }
  Checker check(in, golden, tables.codebook, tables.rotation, &r);
  for (std::int64_t b = 0; b < in.cache.num_blocks; ++b) check.block(b, slot_token, covered);
  r.pass = r.wrong == 0;
  return Status();
}

}  // namespace turboquant::checks
