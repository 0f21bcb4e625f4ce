// The part the CPU backends share: they run every valid argument set (no
// limits of their own beyond validation, which their entry points do), and
// dequantize with the golden model (there is no SIMD dequantize).
#pragma once

#include "turboquant/backend.hpp"

namespace turboquant::registry {

class HostBackend : public Backend {
 protected:
  Status can_decode(const ConstCacheView&, const DecodeArgs&) const override { return Status(); }
  Status can_encode(const ConstCacheView&, const EncodeArgs&) const override { return Status(); }
  Status can_dequantize(const ConstCacheView&, const DequantizeArgs&) const override { return Status(); }
  Status run_dequantize(const ConstCacheView& cache, const DequantizeArgs& args,
                        const BackendOptions&) const override {
    return dequantize_reference(cache, args);
  }
};

}  // namespace turboquant::registry
