// "cuda:strict" and "cuda:fast": turboquant::cuda through its host-pointer
// wrappers (copy in, run, copy out; synchronous). Built only with CUDA.
#include <string>

#include "registry.hpp"
#include "turboquant/cuda.hpp"

namespace turboquant::registry {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(bool fast)
      : info_(kCudaBackends[fast ? 1 : 0]),
        mode_(fast ? cuda::CudaMode::kFast : cuda::CudaMode::kStrict),
        description_(std::string(info_.description) + "; head_dim " + head_dims()) {}
  std::string_view name() const override { return info_.name; }
  std::string_view description() const override { return description_; }
  // Asked on every call, never cached: a process may lose its device, and a
  // forked child must not trust its parent's answer.
  Status status() const override { return cuda::device_status(); }
  bool exact_decode() const override { return info_.exact_decode; }

 protected:
  Status can_decode(const ConstCacheView& cache, const DecodeArgs& args) const override {
    return cuda::decode_can_implement(cache, args, mode_);
  }
  Status can_encode(const ConstCacheView& cache, const EncodeArgs& args) const override {
    return cuda::encode_can_implement(cache, args);
  }
  Status can_dequantize(const ConstCacheView& cache, const DequantizeArgs& args) const override {
    return cuda::dequantize_can_implement(cache, args);
  }
  Status run_decode(const ConstCacheView& cache, const DecodeArgs& args, const BackendOptions&) const override {
    return cuda::decode_from_host(cache, args, mode_);
  }
  Status run_encode(const CacheView& cache, const EncodeArgs& args, const BackendOptions&) const override {
    return cuda::encode_from_host(cache, args);
  }
  Status run_dequantize(const ConstCacheView& cache, const DequantizeArgs& args,
                        const BackendOptions&) const override {
    return cuda::dequantize_from_host(cache, args);
  }

 private:
  // "64, 128, 256": the head_dims this build's kernels are instantiated for.
  static std::string head_dims() {
    std::string s;
    for (int d : cuda::supported_head_dims()) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return s;
  }

  const CudaBackendInfo& info_;
  cuda::CudaMode mode_;
  std::string description_;
};

}  // namespace

const Backend& cuda_backend(bool fast) {
  static const CudaBackend all[2] = {CudaBackend(false), CudaBackend(true)};
  return all[fast ? 1 : 0];
}

}  // namespace turboquant::registry
