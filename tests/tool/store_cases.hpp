// The eleven shared vLLM caches (tests/data/vllm-soa, vllm-aos) and how
// tq validate --cache classifies each against the golden store of its K/V
// (README "Validating a vLLM cache"): only value codes flip (Triton's
// approximate division), and s01 has one key norm one fp16 ulp off.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

namespace tq_test {

struct StoreCase {
  const char* dir;  // under tests/data
  std::int64_t value_code_flips;
  std::int64_t key_norm_one_ulp;
};

inline constexpr StoreCase kStoreCases[] = {
    {"vllm-soa/s01_4bit_nc_d128_bs16_gqa4", 111, 1},  {"vllm-soa/s02_k8v4_d128_bs16_gqa4", 117, 0},
    {"vllm-soa/s03_k3v4_nc_d64_bs32_mha", 71, 0},     {"vllm-soa/s04_3bit_nc_d256_bs16_gqa8", 234, 0},
    {"vllm-soa/s05_4bit_nc_d128_bs64_sharp", 511, 0}, {"vllm-aos/a01_4bit_nc_d128_bs16_gqa4", 136, 0},
    {"vllm-aos/a02_k8v4_d128_bs16_gqa4", 113, 0},     {"vllm-aos/a03_k3v4_nc_d64_bs32_mha", 45, 0},
    {"vllm-aos/a04_3bit_nc_d256_bs16_gqa8", 70, 0},   {"vllm-aos/a05_4bit_nc_d128_bs64_sharp", 127, 0},
    {"vllm-aos/a06_k8v4_e4b15_d128_bs16_gqa4", 119, 0},
};

inline std::filesystem::path store_case_path(const StoreCase& c) {
  return std::filesystem::path(TQ_TEST_DATA_DIR) / c.dir;
}

// How gtest prints a parameter (the listed ctest names).
inline void PrintTo(const StoreCase& c, std::ostream* os) { *os << c.dir; }

// gtest parameter names: "s01", "a06".
inline std::string store_case_id(const StoreCase& c) {
  return std::filesystem::path(c.dir).filename().string().substr(0, 3);
}

}  // namespace tq_test
