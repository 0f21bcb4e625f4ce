// Helpers shared by the CPU backend tests: the ISA x thread-count matrix (from
// the registry of backends), bitwise comparison of float buffers, and dumping
// a failing configuration.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "turboquant/backend.hpp"
#include "turboquant/cpu.hpp"

namespace turboquant::testing {

struct CpuRun {
  std::string isa;
  int threads;
  const Backend* backend = nullptr;  // the registry's "cpu:<isa>"
  std::string name() const { return isa + "/t" + std::to_string(threads); }
};

// The registry's fast CPU backends that run here (one per ISA this CPU runs)
// x the thread counts of the issue.
inline std::vector<CpuRun> all_cpu_runs(std::vector<int> threads = {1, 2, 3, 8}) {
  std::vector<CpuRun> runs;
  for (const Backend* b : backends()) {
    const std::string name(b->name());
    if (name.rfind("cpu:", 0) != 0 || !b->available()) continue;
    for (int t : threads) runs.push_back({name.substr(4), t, b});
  }
  return runs;
}

// Index of the first element whose bits differ, or -1. Two NaNs count as
// equal only when `nan_equal` (NaN payloads are not part of the contract).
template <class T>
std::int64_t first_bit_difference(const std::vector<T>& got, const std::vector<T>& want, bool nan_equal = false) {
  if (got.size() != want.size()) return 0;
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0) return -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if constexpr (std::is_same_v<T, float>) {
      if (nan_equal && std::isnan(got[i]) && std::isnan(want[i])) continue;
    }
    return static_cast<std::int64_t>(i);
  }
  return -1;
}

inline std::string float_hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (0x%08x)", static_cast<double>(f), std::bit_cast<std::uint32_t>(f));
  return buf;
}

// Writes the raw bytes of a failing case next to the test binary, named after
// the configuration, so that it can be replayed.
inline void dump_bytes(const std::string& config, const std::string& what, const void* data, std::size_t bytes) {
  std::string file = "failed_" + config + "_" + what + ".bin";
  for (char& c : file) {
    if (c == '/' || c == ' ' || c == ':') c = '_';
  }
  if (std::FILE* f = std::fopen(file.c_str(), "wb")) {
    std::fwrite(data, 1, bytes, f);
    std::fclose(f);
  }
}

}  // namespace turboquant::testing
