// How the CPU backend uses oneTBB: work runs in the caller's current
// tbb::task_arena (threads == 0) or in a private arena of the requested size,
// created once per size and kept. Private to the CPU backend.
#pragma once

#include <tbb/task_arena.h>

#include <cstddef>
#include <new>
#include <vector>

#include "turboquant/status.hpp"

namespace turboquant::cpu {

// The arena for `threads` (> 0); never destroyed (lives until exit).
tbb::task_arena& arena_for(int threads);

// Runs `fn` in the arena `threads` asks for (0: the caller's current arena);
// an allocation failure becomes kInternal naming `what` was being allocated.
template <class Fn>
Status run_in_arena(int threads, const char* what, Fn&& fn) {
  try {
    if (threads > 0) {
      arena_for(threads).execute(fn);
    } else {
      fn();
    }
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal,
                  std::string("the CPU backend could not allocate its ") + what + " (out of memory)");
  }
  return Status();
}

// Scratch reused across calls on one thread, 64-byte aligned: a call borrows
// it for its duration; a nested call on the same thread (a TBB worker running
// another caller's task while it waits) gets a fresh buffer instead.
class Workspace {
 public:
  explicit Workspace(std::size_t floats);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  float* data() { return data_; }

 private:
  std::vector<float>* cached_ = nullptr;
  std::vector<float> own_;
  float* data_ = nullptr;
};

}  // namespace turboquant::cpu
