// A build without the CUDA backend: CUDA arrays get a clear answer.
#include "device_ops.hpp"

namespace tqpy {
namespace {

turboquant::Status not_built() {
  return turboquant::Status(turboquant::StatusCode::kBackendUnavailable,
                            "this turboquant build has no CUDA backend (built without nvcc); reinstall where the "
                            "CUDA toolkit is present, or pass CPU arrays");
}

}  // namespace

bool cuda_built() { return false; }
std::size_t cuda_decode_workspace_bytes(int, int, int, int) { return 0; }
const char* cuda_decode_kernel(const turboquant::ConstCacheView&, const turboquant::DecodeArgs&, bool) { return ""; }
turboquant::Status cuda_decode(const turboquant::ConstCacheView&, const turboquant::DecodeArgs&, bool, int,
                               std::uintptr_t, turboquant::MutableBuffer) {
  return not_built();
}
turboquant::Status cuda_dequantize(const turboquant::ConstCacheView&, const turboquant::DequantizeArgs&, int,
                                   std::uintptr_t) {
  return not_built();
}
turboquant::Status cuda_dequantize_sequences(const turboquant::ConstCacheView&,
                                             const turboquant::DequantizeSequencesArgs&, int, std::uintptr_t) {
  return not_built();
}
turboquant::Status device_synchronize(const Device& device) {
  return device.cuda ? not_built() : turboquant::Status();
}
turboquant::Status cuda_encode(const turboquant::CacheView&, const turboquant::EncodeArgs&, int, std::uintptr_t) {
  return not_built();
}

}  // namespace tqpy
