#include "parallel.hpp"

#include <tbb/task_arena.h>

#include <cstdint>
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

namespace {
thread_local std::vector<float> t_cache;
thread_local bool t_busy = false;
}  // namespace

namespace {
// The first 64-byte aligned float of `v` (which holds 15 floats of slack).
float* aligned64(std::vector<float>& v) {
  const auto address = reinterpret_cast<std::uintptr_t>(v.data());
  return reinterpret_cast<float*>((address + 63) & ~std::uintptr_t{63});
}
}  // namespace

Workspace::Workspace(std::size_t floats) {
  std::vector<float>* v = &own_;
  if (!t_busy) {
    t_busy = true;
    cached_ = &t_cache;
    v = &t_cache;
  }
  if (v->size() < floats + 15) v->resize(floats + 15);
  data_ = aligned64(*v);
}

Workspace::~Workspace() {
  if (cached_ != nullptr) t_busy = false;
}

}  // namespace turboquant::cpu
