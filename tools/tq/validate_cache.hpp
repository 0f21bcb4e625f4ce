// tq validate CASE --cache FILE: a cache some store kernel wrote, against the
// golden model's store of the case's K/V (turboquant::checks::validate_cache).
#pragma once

#include <string>

namespace tq {

struct ValidateCacheOptions {
  std::string case_dir;
  std::string cache;    // a path, or a file name inside CASE (with or without .npy)
  int max_report = 20;  // wrong elements listed
  bool json = false;
};

// Exit 0 when nothing is wrong, 1 when something is; bad input throws (exit 2).
int run_validate_cache(const ValidateCacheOptions& o);

}  // namespace tq
