// Instantiations and launcher of the encode kernel (--fmad=false).
#include <algorithm>
#include <cstdint>

#include "device_cache.hpp"
#include "encode.cuh"
#include "launch.hpp"

namespace turboquant::cuda::detail {

template <int D, core::LayoutKind kLayout, core::Fp8Format kFp8, bool kDense, DType kT, bool kVector>
static cudaError_t launch_encode_instance(const EncodeParams& p, cudaStream_t stream) {
  constexpr int kThreads = kEncodeThreads<kDense>;
  constexpr int kItemsPerBlock = kThreads / RecordGroup<D>::kLanes;
  static PerDeviceInt resident_cache;
  const int resident_per_sm = resident_cache.get([] {
    int n = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, encode_kernel<D, kLayout, kFp8, kDense, kT, kVector>,
                                                         kThreads, 0) ==
                   cudaSuccess
               ? std::max(n, 1)
               : 1;
  });
  const std::int64_t items = p.num_tokens * p.layout.num_kv_heads;
  const std::int64_t wave = std::int64_t{device_sm_count()} * resident_per_sm;
  const std::int64_t blocks = std::min((items + kItemsPerBlock - 1) / kItemsPerBlock, std::max<std::int64_t>(wave, 1));
  encode_kernel<D, kLayout, kFp8, kDense, kT, kVector><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

// The instance of the cache's layout kind (the kernel folds its addresses)
// and FP8 flavour (e4b15 instances only without a dense rotation: FP8 keys
// are never rotated).
template <int D, core::Fp8Format kFp8, bool kDense, DType kT, bool kVector>
static cudaError_t launch_encode_kind(const EncodeParams& p, cudaStream_t stream) {
  return p.layout.format.aos() ? launch_encode_instance<D, core::LayoutKind::kAoS, kFp8, kDense, kT, kVector>(p, stream)
                               : launch_encode_instance<D, core::LayoutKind::kSoA, kFp8, kDense, kT, kVector>(p, stream);
}
template <int D, bool kDense, DType kT, bool kVector>
static cudaError_t launch_encode_layout(const EncodeParams& p, cudaStream_t stream) {
  const core::Format& f = p.layout.format;
  if constexpr (!kDense) {
    if (f.fp8_keys() && f.fp8_format == core::Fp8Format::kE4b15) {
      return launch_encode_kind<D, core::Fp8Format::kE4b15, kDense, kT, kVector>(p, stream);
    }
  }
  return launch_encode_kind<D, core::Fp8Format::kE4m3, kDense, kT, kVector>(p, stream);
}

// Vector loads when both input pointers are aligned to a lane's run of
// elements (always for fresh allocations); the dense-rotation path, slow
// anyway, always loads elements one by one.
template <int D, bool kDense, DType kT>
static cudaError_t launch_encode_for(const EncodeParams& p, cudaStream_t stream) {
  constexpr std::uintptr_t kAlign = std::min<std::uintptr_t>(RecordGroup<D>::kRun * kInputBytes<kT>, 16);
  const bool aligned = (reinterpret_cast<std::uintptr_t>(p.keys) | reinterpret_cast<std::uintptr_t>(p.values)) % kAlign == 0;
  if constexpr (!kDense) {
    if (aligned) return launch_encode_layout<D, false, kT, true>(p, stream);
  }
  return launch_encode_layout<D, kDense, kT, false>(p, stream);
}

template <int D>
static cudaError_t launch_encode_d(const EncodeParams& p, cudaStream_t stream) {
  const bool dense = !p.layout.format.fp8_keys() && p.rotation != nullptr;
  switch (p.dtype) {
    case DType::kFloat32:
      return dense ? launch_encode_for<D, true, DType::kFloat32>(p, stream)
                   : launch_encode_for<D, false, DType::kFloat32>(p, stream);
    case DType::kFloat16:
      return dense ? launch_encode_for<D, true, DType::kFloat16>(p, stream)
                   : launch_encode_for<D, false, DType::kFloat16>(p, stream);
    case DType::kBFloat16:
      return dense ? launch_encode_for<D, true, DType::kBFloat16>(p, stream)
                   : launch_encode_for<D, false, DType::kBFloat16>(p, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_encode(const EncodeParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  cudaError_t err = cudaErrorInvalidValue;  // a head_dim without an instance (refused by encode_can_implement)
  (void)dispatch_head_dim(HeadDims{}, p.layout.format.head_dim, "encode", [&](auto d) {
    err = launch_encode_d<decltype(d)::value>(p, stream);
    return Status();
  });
  return err;
}

}  // namespace turboquant::cuda::detail
