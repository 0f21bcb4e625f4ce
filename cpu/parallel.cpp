#include "parallel.hpp"

#include <tbb/task_arena.h>

#include <map>
#include <memory>
#include <mutex>

namespace turboquant::cpu {

tbb::task_arena& arena_for(int threads) {
  static std::mutex mutex;
  static auto* arenas = new std::map<int, tbb::task_arena*>();  // leaked: outlives every caller
  std::lock_guard<std::mutex> lock(mutex);
  tbb::task_arena*& a = (*arenas)[threads];
  if (a == nullptr) a = new tbb::task_arena(threads);
  return *a;
}

int concurrency(int threads) { return threads > 0 ? threads : tbb::this_task_arena::max_concurrency(); }

namespace {
thread_local std::vector<float> t_cache;
thread_local bool t_busy = false;
}  // namespace

Workspace::Workspace(std::size_t floats) {
  if (!t_busy) {
    t_busy = true;
    cached_ = &t_cache;
    if (t_cache.size() < floats) t_cache.resize(floats);
    data_ = t_cache.data();
  } else {
    own_.resize(floats);
    data_ = own_.data();
  }
}

Workspace::~Workspace() {
  if (cached_ != nullptr) t_busy = false;
}

}  // namespace turboquant::cpu
