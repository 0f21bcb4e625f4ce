// What every backend shares: the options check, the availability check before
// each call, and the look-ups over the registry.
#include <string>

#include "registry.hpp"

namespace turboquant {
namespace {

// Options first (a caller's mistake whatever the machine), then availability.
Status ready(const Backend& backend, const BackendOptions& options) {
  if (options.threads < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "options.threads = " + std::to_string(options.threads) + ": must be >= 0 (0: all)");
  }
  return backend.status();
}

}  // namespace

std::string Backend::unavailable_reason() const {
  const Status s = status();
  return s.ok() ? std::string() : s.message();
}

Status Backend::supports(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return can_decode(cache, args);
}

Status Backend::supports(const ConstCacheView& cache, const EncodeArgs& args, const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return can_encode(cache, args);
}

Status Backend::supports(const ConstCacheView& cache, const DequantizeArgs& args,
                         const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return can_dequantize(cache, args);
}

Status Backend::decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return run_decode(cache, args, options);
}

Status Backend::encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return run_encode(cache, args, options);
}

Status Backend::dequantize(const ConstCacheView& cache, const DequantizeArgs& args,
                           const BackendOptions& options) const {
  if (Status s = ready(*this, options); !s.ok()) return s;
  return run_dequantize(cache, args, options);
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : backends()) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

std::string backend_names() {
  std::string s;
  for (const Backend* b : backends()) s += (s.empty() ? "" : ", ") + std::string(b->name());
  return s;
}

}  // namespace turboquant
