// Values the launchers compute once per device (function attributes set,
// occupancy, SM count). A process may drive several GPUs, each with its own
// numbers, so they are kept per device ordinal, never process-wide.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace turboquant::cuda::detail {

// One int per device ordinal, computed on the first call on that device
// (the current device, cudaGetDevice). Lock-free: two threads that race on a
// first call both compute it, with the same result. Ordinals past kMaxDevices
// are computed on every call (correct, uncached).
class PerDeviceInt {
 public:
  static constexpr int kMaxDevices = 64;

  template <class F>
  int get(F&& compute) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return compute();
    std::atomic<long long>& slot = values_[dev];
    const long long stored = slot.load(std::memory_order_acquire);
    if (stored != 0) return static_cast<int>(stored - kSet);
    const int v = compute();
    slot.store(kSet + v, std::memory_order_release);
    return v;
  }

 private:
  // 0: not computed yet (so that a static instance is zero-initialized at
  // load time, without a guard); else kSet + the value.
  static constexpr long long kSet = 1LL << 40;
  std::atomic<long long> values_[kMaxDevices] = {};
};

// cudaFuncSetAttribute(kernel, max dynamic shared memory, bytes) once per
// device and kernel (the attribute belongs to the kernel on the current
// device); returns its result.
template <class Kernel>
cudaError_t set_max_dynamic_smem_once(PerDeviceInt& cache, Kernel kernel, int bytes) {
  return static_cast<cudaError_t>(cache.get([&] {
    return static_cast<int>(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }));
}

// Resident blocks per SM of `kernel` with `threads` threads and `smem` bytes of
// dynamic shared memory on the current device (0 on error), cached per device
// in the caller's caches (one pair per kernel instance; attr_cache is the one
// set_max_dynamic_smem_once takes for the launches).
template <class Kernel>
int cached_occupancy(PerDeviceInt& attr_cache, PerDeviceInt& blocks_cache, Kernel kernel, int threads, int smem) {
  return blocks_cache.get([&] {
    if (set_max_dynamic_smem_once(attr_cache, kernel, smem) != cudaSuccess) return 0;
    int n = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) == cudaSuccess ? n : 0;
  });
}

}  // namespace turboquant::cuda::detail
