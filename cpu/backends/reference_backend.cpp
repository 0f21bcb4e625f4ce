// "cpu-ref": the golden model (cpu/reference/), the bits every other backend
// is tested against.
#include "host_backend.hpp"
#include "registry.hpp"

namespace turboquant::registry {
namespace {

class ReferenceBackend final : public HostBackend {
 public:
  std::string_view name() const override { return "cpu-ref"; }
  std::string_view description() const override {
    return "the golden model: scalar and single-threaded, the bits every other backend is tested against";
  }
  Status status() const override { return Status(); }
  bool exact_decode() const override { return true; }

 protected:
  Status run_decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions&) const override {
    return decode_reference(cache, args);
  }
  Status run_encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions&) const override {
    return encode_reference(cache, args);
  }
};

}  // namespace

const Backend& reference_backend() {
  static const ReferenceBackend backend;
  return backend;
}

}  // namespace turboquant::registry
