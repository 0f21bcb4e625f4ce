// Sets (or, with nullptr, unsets) an environment variable for the scope of a
// test, restoring the previous value after it. For the knobs the library reads
// at every call (TURBOQUANT_ISA at backend selection, TQ_FAST_HEAD_TEAMS at every
// CUDA decode plan).
#pragma once

#include <cstdlib>
#include <string>

namespace tq_test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace tq_test
