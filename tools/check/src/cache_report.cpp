// render_cache_report: tq validate --cache's text after the case header.
#include "text.hpp"
#include "turboquant/check/cache_check.hpp"

namespace turboquant::checks {

using internal::sprintf_string;

namespace {

std::string value_text(CacheField field, int value) {
  switch (field) {
    case CacheField::kKeyNorm:
    case CacheField::kValueScale:
    case CacheField::kValueZero: return sprintf_string("0x%04x", value);
    case CacheField::kFp8Key:
    case CacheField::kUntouched: return sprintf_string("0x%02x", value);
    default: return std::to_string(value);
  }
}

}  // namespace

std::string describe_item(const CacheItem& it) {
  std::string s = sprintf_string("block %lld", static_cast<long long>(it.block));
  if (it.position >= 0) s += sprintf_string(" position %d head %d", it.position, it.head);
  s += std::string(" ") + cache_field_name(it.field);
  if (it.field == CacheField::kUntouched) {
    s += it.within == CacheField::kUntouched ? " (padding)"
                                              : std::string(" (") + cache_field_name(it.within) +
                                                    " of an unwritten slot, byte " + std::to_string(it.dim) + ")";
  } else if (it.dim >= 0) {
    s += " dim " + std::to_string(it.dim);
  }
  s += sprintf_string(": golden %s, cache %s", value_text(it.field, it.golden).c_str(),
                      value_text(it.field, it.got).c_str());
  if (it.boundary_ulps >= 0) s += sprintf_string(" (%.3g ulps from the boundary)", it.boundary_ulps);
  return s + sprintf_string(" [byte %lld]", static_cast<long long>(it.byte_offset));
}

std::string render_cache_report(const CacheReport& r) {
  std::string s = sprintf_string("  %-16s %-5s %12s %14s %11s %10s   %s\n", "field", "unit", "identical",
                                 "boundary flip", "fp16 1 ulp", "wrong", "worst flip (ulps)");
  for (CacheField f : kAllCacheFields) {
    if (!cache_field_applies(r.format, f)) continue;
    const CacheFieldCounts& c = r.at(f);
    const bool codes = f == CacheField::kKeyCodes || f == CacheField::kValueCodes;
    const bool fp16 = f == CacheField::kKeyNorm || f == CacheField::kValueScale || f == CacheField::kValueZero;
    s += sprintf_string("  %-16s %-5s %12lld %14s %11s %10lld   %s\n", cache_field_name(f), cache_field_unit(f),
                        static_cast<long long>(c.identical),
                        codes ? std::to_string(c.boundary_flip).c_str() : "-",
                        fp16 ? std::to_string(c.one_ulp).c_str() : "-", static_cast<long long>(c.wrong),
                        codes && c.boundary_flip > 0 ? sprintf_string("%.3g", c.worst_flip_ulps).c_str() : "-");
  }
  s += "\n";
  const char* name = r.cache_name.c_str();
  if (r.pass) {
    return s + sprintf_string(
                   "PASS  %s: every difference from the golden store is a one-step code flip within %g ulps of "
                   "its boundary or an fp16 field one ulp off\n",
                   name, r.boundary_ulps);
  }
  s += sprintf_string("wrong elements (first %zu of %lld):\n", r.wrong_items.size(), static_cast<long long>(r.wrong));
  for (const CacheItem& it : r.wrong_items) s += "  " + describe_item(it) + "\n";
  return s + sprintf_string("FAIL  %s: %lld wrong element%s\n", name, static_cast<long long>(r.wrong), r.wrong == 1 ? "" : "s");
}

}  // namespace turboquant::checks
