// The CUDA backends of a build without CUDA: listed (so that a tool can say
// why they do not run), never available.
#include "registry.hpp"

namespace turboquant::registry {
namespace {

const char* const kReason = "not built with CUDA (configure with -DTURBOQUANT_ENABLE_CUDA=ON)";

class UnbuiltBackend final : public Backend {
 public:
  explicit UnbuiltBackend(const CudaBackendInfo& info) : info_(info) {}
  std::string_view name() const override { return info_.name; }
  std::string_view description() const override { return info_.description; }
  Status status() const override { return Status(StatusCode::kBackendUnavailable, kReason); }
  bool exact_decode() const override { return info_.exact_decode; }

 protected:
  // Never reached: Backend's public functions stop at status().
  Status can_decode(const ConstCacheView&, const DecodeArgs&) const override { return status(); }
  Status can_encode(const ConstCacheView&, const EncodeArgs&) const override { return status(); }
  Status can_dequantize(const ConstCacheView&, const DequantizeArgs&) const override { return status(); }
  Status run_decode(const ConstCacheView&, const DecodeArgs&, const BackendOptions&) const override {
    return status();
  }
  Status run_encode(const CacheView&, const EncodeArgs&, const BackendOptions&) const override { return status(); }
  Status run_dequantize(const ConstCacheView&, const DequantizeArgs&, const BackendOptions&) const override {
    return status();
  }

 private:
  const CudaBackendInfo& info_;
};

}  // namespace

const Backend& cuda_backend(bool fast) {
  static const UnbuiltBackend all[2] = {UnbuiltBackend(kCudaBackends[0]), UnbuiltBackend(kCudaBackends[1])};
  return all[fast ? 1 : 0];
}

}  // namespace turboquant::registry
