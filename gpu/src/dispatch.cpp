// The run-time dispatch over head_dim to the generated instances, and the
// messages for what the build does not instantiate.
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "device_cache.hpp"
#include "launch.hpp"

namespace turboquant::cuda::detail {
namespace {

template <int... D>
std::string join(DimList<D...>) {
  const int dims[] = {D...};
  const int n = static_cast<int>(sizeof...(D));
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " and " : ", ";
    out += std::to_string(dims[i]);
  }
  return out;
}

template <int... D>
std::vector<int> to_vector(DimList<D...>) {
  return {D...};
}

}  // namespace

std::string head_dims_text() { return join(HeadDims{}); }

Status unsupported_head_dim(int head_dim, const char* what) {
  return Status(StatusCode::kUnsupported,
                "head_dim = " + std::to_string(head_dim) + ": the CUDA " + what + " supports " + head_dims_text());
}

Status unsupported_bits(int key_bits, int value_bits, const char* what) {
  return Status(StatusCode::kUnsupported, "key_bits = " + std::to_string(key_bits) + ", value_bits = " +
                                              std::to_string(value_bits) + ": the CUDA " + what + " has no instance");
}

Status launch_decode(const DecodeParams& p, bool fast, const FastTensorMaps& maps, cudaStream_t stream) {
  return dispatch_head_dim(HeadDims{}, p.layout.format.head_dim, "decode", [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (!fast) return launch_strict_decode_dim<D>(p, stream);
    return p.tensor_copy ? launch_fast_decode_dim<D, true>(p, maps, stream)
                             : launch_fast_decode_dim<D, false>(p, maps, stream);
  });
}

namespace {

int fast_residency(const core::Format& f, bool tensor_copy, int column_tiles, int warps, int cluster) {
  int blocks = 0;
  (void)dispatch_head_dim(HeadDims{}, f.head_dim, "decode", [&](auto d) {
    constexpr int D = decltype(d)::value;
    blocks = tensor_copy ? fast_decode_occupancy_dim<D, true>(f, column_tiles, warps, cluster)
                        : fast_decode_occupancy_dim<D, false>(f, column_tiles, warps, cluster);
    return Status();
  });
  return blocks;
}

}  // namespace

int fast_decode_occupancy(const core::Format& f, bool tensor_copy, int column_tiles, int warps) {
  return fast_residency(f, tensor_copy, column_tiles, warps, 1);
}

int fast_decode_cluster_residency(const core::Format& f, bool tensor_copy, int column_tiles, int warps, int cluster) {
  return fast_residency(f, tensor_copy, column_tiles, warps, cluster);
}

bool device_has_tensor_copies() {
  static PerDeviceInt cache;
  return cache.get([] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      return 0;
    }
    return major >= 9 ? 1 : 0;
  }) != 0;
}

int device_sm_count() {
  static PerDeviceInt cache;
  return cache.get([] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      return 0;
    }
    return n;
  });
}

int device_dram_mbps_per_sm() {
  static PerDeviceInt cache;
  return cache.get([] {
    int dev = 0, khz = 0, bits = 0;
    const int sms = device_sm_count();
    if (sms <= 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
      return 0;
    }
    // Double data rate: two transfers of bits / 8 bytes per clock.
    return static_cast<int>(2.0 * khz * 1e3 * (bits / 8) / 1e6 / sms);
  });
}

}  // namespace turboquant::cuda::detail

namespace turboquant::cuda {

std::vector<int> supported_head_dims() { return detail::to_vector(detail::HeadDims{}); }

}  // namespace turboquant::cuda
