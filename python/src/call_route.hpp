// Where one call of the extension runs, shared by its operations
// (bind_ops.cpp): the backend (a registry backend on host arrays, or the CUDA
// kernels on device arrays), the stream, and the checks every operation makes
// of the cache and of its integer arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/cache_view.hpp"

namespace tqpy {

struct Route {
  const turboquant::Backend* host = nullptr;  // set for CPU backends
  bool cuda = false;
  bool fast = true;  // cuda: fast (tensor cores) or strict (bit-exact)
  std::string name;  // as the caller wrote it, for messages
};

// `backend` as the caller wrote it ("" : the arrays' device decides) on
// arrays on `device`; ValueError naming `first` when they disagree.
Route route(const std::string& backend, const Device& device, const ArrayArg& first);

// A call's stream argument: a cudaStream_t as an integer, or None where the
// Python layer leaves it to the extension (turboquant/_arrays.py stream_handle).
using StreamArg = std::optional<std::uintptr_t>;

// The stream a call runs on: the caller's, else the current stream of the
// producer of `ref` (the array whose library decides: torch's current stream
// for a torch tensor) on the call's device, else 0 (the legacy default
// stream; host calls ignore it).
template <class A>
std::uintptr_t call_stream(const StreamArg& stream, const Device& device, const A& ref) {
  if (stream) return *stream;
  return device.cuda ? ref.route().current_stream(device.id) : 0;
}

// `v` as an int; ValueError naming `what` past 2^31 - 1.
int as_int(const char* what, std::int64_t v);

// kv_cache [num_blocks, block_size, Hk, slot_bytes_aligned] uint8, checked by
// in_array or out_array.
template <class Array, class Check>
ArrayArg cache_array(const PyLayout& l, const Array& a, Check check_array) {
  return check_array("kv_cache", a, {Elem::kUInt8},
                     {-1, l.layout.block_size, l.layout.num_kv_heads, l.layout.format.slot_bytes_aligned()},
                     {"num_blocks", "block_size", "num_kv_heads", "slot_bytes_aligned"});
}

turboquant::ConstCacheView cache_view(const PyLayout& l, const ArrayArg& cache);

// The CPU backends' options; ValueError for threads < 0.
turboquant::BackendOptions host_options(int threads);

}  // namespace tqpy
