// The process-wide plan policies the benchmarks switch by environment
// variable and the tests by their setters (decode_setup.hpp): the wide
// multi-token kernel's (TQ_FAST_WIDE), the fused AoS heads' (TQ_FAST_FUSED)
// and the AoS head pacing's
// (TQ_FAST_CLUSTER, TQ_FAST_PACE, TQ_FAST_CLUSTER_FORCE), the strict AoS
// decode's uniform row shift (TQ_STRICT_SHIFT), the wide kernel's loader
// (TQ_WIDE_LOADER) and the wide kernel itself (TQ_WIDE_KERNEL). Each value is read
// from the environment at its first use, then kept (lock-free: two threads
// racing on the first use read the same value).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "decode_setup.hpp"
#include "launch.hpp"

namespace turboquant::cuda::detail {
namespace {

// -1: not read from the environment yet.
std::atomic<int> g_wide_policy{-1};
std::atomic<int> g_fused_policy{-1};
std::atomic<int> g_max_cluster{-1};
std::atomic<int> g_pace_tiles{-1};
std::atomic<int> g_force_cluster{-1};
std::atomic<int> g_strict_uniform_shift{-1};
std::atomic<int> g_wide_loader{-1};
std::atomic<int> g_wide_kernel{-1};

// slot's value, from_environment() on the first call.
template <class F>
int load_once(std::atomic<int>& slot, F&& from_environment) {
  int v = slot.load(std::memory_order_relaxed);
  if (v < 0) {
    int unset = -1;
    slot.compare_exchange_strong(unset, from_environment());
    v = slot.load(std::memory_order_relaxed);
  }
  return v;
}

// The integer in variable `name` if it lies in [1, limit], else fallback.
int positive_from_environment(const char* name, int fallback, int limit) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  const long n = std::strtol(v, nullptr, 10);
  return n >= 1 && n <= limit ? static_cast<int>(n) : fallback;
}

// A policy of values kAuto, kOff, kForce (WidePolicy, FusedPolicy) from
// variable `name`: "off", "force", else kAuto.
template <class Policy>
int auto_off_force_from_environment(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr && std::strcmp(v, "off") == 0) return static_cast<int>(Policy::kOff);
  if (v != nullptr && std::strcmp(v, "force") == 0) return static_cast<int>(Policy::kForce);
  return static_cast<int>(Policy::kAuto);
}

bool strict_uniform_shift_from_environment() {
  const char* v = std::getenv("TQ_STRICT_SHIFT");
  return v == nullptr || std::strcmp(v, "per-row") != 0;
}

WideLoader wide_loader_from_environment() {
  const char* v = std::getenv("TQ_WIDE_LOADER");
  if (v != nullptr && std::strcmp(v, "tensor") == 0) return WideLoader::kTensor;
  if (v != nullptr && std::strcmp(v, "cp.async") == 0) return WideLoader::kCpAsync;
  return WideLoader::kAuto;
}

WideKernel wide_kernel_from_environment() {
  const char* v = std::getenv("TQ_WIDE_KERNEL");
  if (v != nullptr && std::strcmp(v, "classic") == 0) return WideKernel::kClassic;
  if (v != nullptr && std::strcmp(v, "specialized") == 0) return WideKernel::kSpecialized;
  return WideKernel::kAuto;
}

}  // namespace

WidePolicy wide_policy() {
  return static_cast<WidePolicy>(
      load_once(g_wide_policy, [] { return auto_off_force_from_environment<WidePolicy>("TQ_FAST_WIDE"); }));
}

void set_wide_policy(WidePolicy policy) { g_wide_policy.store(static_cast<int>(policy), std::memory_order_relaxed); }

FusedPolicy fused_policy() {
  return static_cast<FusedPolicy>(
      load_once(g_fused_policy, [] { return auto_off_force_from_environment<FusedPolicy>("TQ_FAST_FUSED"); }));
}

void set_fused_policy(FusedPolicy policy) { g_fused_policy.store(static_cast<int>(policy), std::memory_order_relaxed); }

PacePolicy pace_policy() {
  return PacePolicy{
      load_once(g_max_cluster, [] { return positive_from_environment("TQ_FAST_CLUSTER", kPaceMaxCluster, kPaceMaxCluster); }),
      load_once(g_pace_tiles, [] { return positive_from_environment("TQ_FAST_PACE", kPaceTiles, 1 << 20); }),
      load_once(g_force_cluster, [] { return positive_from_environment("TQ_FAST_CLUSTER_FORCE", 0, 1); }) == 1};
}

void set_pace_policy(PacePolicy policy) {
  g_max_cluster.store(std::clamp(policy.max_cluster, 1, kPaceMaxCluster), std::memory_order_relaxed);
  g_pace_tiles.store(std::max(policy.pace_tiles, 1), std::memory_order_relaxed);
  g_force_cluster.store(policy.force ? 1 : 0, std::memory_order_relaxed);
}

bool strict_uniform_shift() {
  return load_once(g_strict_uniform_shift, [] { return strict_uniform_shift_from_environment() ? 1 : 0; }) == 1;
}

void set_strict_uniform_shift(bool allowed) { g_strict_uniform_shift.store(allowed ? 1 : 0, std::memory_order_relaxed); }

WideLoader wide_loader() {
  return static_cast<WideLoader>(
      load_once(g_wide_loader, [] { return static_cast<int>(wide_loader_from_environment()); }));
}

void set_wide_loader(WideLoader loader) { g_wide_loader.store(static_cast<int>(loader), std::memory_order_relaxed); }

WideKernel wide_kernel() {
  return static_cast<WideKernel>(
      load_once(g_wide_kernel, [] { return static_cast<int>(wide_kernel_from_environment()); }));
}

void set_wide_kernel(WideKernel kernel) { g_wide_kernel.store(static_cast<int>(kernel), std::memory_order_relaxed); }

bool wide_kernel_specialized() {
  const WideKernel k = wide_kernel();
  return k == WideKernel::kAuto ? device_has_tensor_copies() : k == WideKernel::kSpecialized;
}

}  // namespace turboquant::cuda::detail
