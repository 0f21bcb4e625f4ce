// The real vLLM AoS cases of tests/data/vllm-aos (vLLM 0.33.0's AoS Triton
// store and decode on an H200; see that folder's README).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "turboquant/io/case_dir.hpp"

namespace turboquant::testing {

inline const char* const kAosCases[] = {"a01_4bit_nc_d128_bs16_gqa4", "a02_k8v4_d128_bs16_gqa4",
                                        "a03_k3v4_nc_d64_bs32_mha",   "a04_3bit_nc_d256_bs16_gqa8",
                                        "a05_4bit_nc_d128_bs64_sharp", "a06_k8v4_e4b15_d128_bs16_gqa4"};

// Every file of the case (all_required); a load failure fails the test.
inline io::CaseDir load_aos_case(const std::string& name) {
  io::CaseDir c;
  const Status s =
      io::load_case(std::string(TQ_TEST_DATA_DIR) + "/vllm-aos/" + name, io::CaseLoadOptions::all_required(), &c);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

// "a01" from "a01_4bit_nc_...", for test names.
inline std::string aos_case_id(const ::testing::TestParamInfo<const char*>& info) {
  return std::string(info.param).substr(0, 3);
}

}  // namespace turboquant::testing
