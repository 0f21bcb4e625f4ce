// Arrays from Python (numpy, torch, CuPy, JAX: anything nanobind takes through
// DLPack or the buffer protocol), checked the way the library checks its own
// arguments: every problem is an exception whose message names the argument
// and the value ("query: dtype float64 is not one of float32, float16,
// bfloat16"). The library then sees plain pointers and byte counts.
#pragma once

#include <nanobind/ndarray.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlpack_exchange.hpp"
#include "turboquant/dtype.hpp"

namespace tqpy {

namespace nb = nanobind;

// An array argument for the length of one call: what the library reads of it
// (data, device, dtype, shape, strides), with the accessors of nb::ndarray,
// and the route it came by (dlpack_exchange.hpp), which names its producer's
// current stream. Borrowed through an exchange table, the view stays valid
// while the caller's reference does, i.e. for the call; imported, `import_`
// keeps the import alive.
template <class Import, bool kWritten>
class ArrayRef {
 public:
  ArrayRef() = default;
  static ArrayRef borrowed(const nb::dlpack::dltensor& view, const ArrayRoute& route) {
    ArrayRef r;
    r.view_ = view;
    r.route_ = route;
    return r;
  }
  static ArrayRef imported(Import a, const ArrayRoute& route) {
    ArrayRef r;
    r.view_.data = const_cast<void*>(static_cast<const void*>(a.data()));  // the offset applied
    r.view_.device = {a.device_type(), a.device_id()};
    r.view_.ndim = static_cast<std::int32_t>(a.ndim());
    r.view_.dtype = a.dtype();
    r.view_.shape = const_cast<std::int64_t*>(a.shape_ptr());  // the import's, which r keeps
    r.view_.strides = const_cast<std::int64_t*>(a.stride_ptr());
    r.import_ = std::move(a);
    r.route_ = route;
    return r;
  }

  nb::dlpack::dtype dtype() const { return view_.dtype; }
  std::size_t ndim() const { return static_cast<std::size_t>(view_.ndim); }
  std::size_t shape(std::size_t i) const { return static_cast<std::size_t>(view_.shape[i]); }
  // In elements; a producer may leave the strides out for C order.
  std::int64_t stride(std::size_t i) const {
    if (view_.strides != nullptr) return view_.strides[i];
    std::int64_t s = 1;
    for (std::size_t d = i + 1; d < ndim(); ++d) s *= view_.shape[d];
    return s;
  }
  std::size_t size() const {
    std::size_t n = 1;
    for (std::size_t d = 0; d < ndim(); ++d) n *= shape(d);
    return n;
  }
  std::size_t nbytes() const { return (std::size_t{view_.dtype.bits} * view_.dtype.lanes * size() + 7) / 8; }
  int device_type() const { return view_.device.device_type; }
  int device_id() const { return view_.device.device_id; }
  void* data() const { return static_cast<std::uint8_t*>(view_.data) + view_.byte_offset; }
  const ArrayRoute& route() const { return route_; }

 private:
  nb::dlpack::dltensor view_{};
  ArrayRoute route_;
  Import import_;
};

using InArray = ArrayRef<nb::ndarray<nb::ro>, false>;  // read by the library
using OutArray = ArrayRef<nb::ndarray<>, true>;        // written by the library

// Where an array lives: the CPU, or one CUDA device.
struct Device {
  bool cuda = false;
  int id = 0;
  bool operator==(const Device&) const = default;
  std::string name() const;  // "cpu", "cuda:1"
};

// Element types the library takes.
enum class Elem : std::uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kUInt8, kInt32, kInt64 };
const char* elem_name(Elem e);

// One checked argument.
struct ArrayArg {
  std::string name;  // "query"
  const void* data = nullptr;
  void* mutable_data = nullptr;  // outputs only
  Elem elem = Elem::kFloat32;
  // The most dimensions an argument has (kv_cache; the keys of the block-table
  // dequantize): a fixed array, no allocation per argument and call.
  static constexpr std::size_t kMaxDims = 4;
  std::array<std::int64_t, kMaxDims> shape{};
  std::size_t ndim = 0;
  Device device;
  std::size_t bytes = 0;

  std::int64_t dim(int i) const;  // std::out_of_range past ndim
  std::int64_t size() const;
  turboquant::ConstBuffer in() const { return {data, bytes}; }
  turboquant::MutableBuffer out() const { return {mutable_data, bytes}; }
  turboquant::DType dtype() const;  // float32/16/bf16 only
};

// Checks the dtype (one of `allowed`), the number of dimensions and C
// contiguity; `shape` entries >= 0 must match exactly ("-1": any), and the
// message says which dimension and what it means (`dim_names`, e.g. "B").
ArrayArg in_array(const char* name, const InArray& a, std::initializer_list<Elem> allowed,
                  std::initializer_list<std::int64_t> shape, std::initializer_list<const char*> dim_names);
ArrayArg out_array(const char* name, const OutArray& a, std::initializer_list<Elem> allowed,
                   std::initializer_list<std::int64_t> shape, std::initializer_list<const char*> dim_names);

// The device every one of `args` is on; an error naming the first two that
// disagree.
Device common_device(std::initializer_list<const ArrayArg*> args);

// "[2, 8, 128]"
std::string shape_string(const std::int64_t* dims, std::size_t ndim);

}  // namespace tqpy

namespace nanobind::detail {

// Python -> tqpy::ArrayRef by the type's route: borrowed through its exchange
// table (an output only where the route says the library may write it), or
// nanobind's ndarray caster (same flags, so the same conversions and errors) on
// torch's capsule or on the object itself.
template <class Import, bool kWritten>
struct type_caster<tqpy::ArrayRef<Import, kWritten>> {
  using Ref = tqpy::ArrayRef<Import, kWritten>;  // (a macro argument holds no bare comma)
  NB_TYPE_CASTER(Ref, make_caster<Import>::Name)

  template <class Flags>  // uint8_t or uint32_t, by nanobind version
  bool from_python(handle src, Flags flags, cleanup_list* cleanup) noexcept {
    using Kind = tqpy::ArrayRoute::Kind;
    const tqpy::ArrayRoute route = tqpy::array_route(Py_TYPE(src.ptr()));
    if (route.kind == Kind::kExchange && (route.writable || !kWritten)) {
      if (auto view = route.borrow(src.ptr())) {
        value = Value::borrowed(*view, route);
        return true;
      }
    }
    object capsule;  // kTorchCapsule: what nanobind imports instead of the tensor
    if (route.kind == Kind::kTorchCapsule) capsule = steal(route.torch_capsule(src.ptr()));
    make_caster<Import> inner;
    if (!inner.from_python(capsule.is_valid() ? handle(capsule) : src, flags, cleanup)) return false;
    value = Value::imported(std::move(inner.value), route);
    return true;
  }

  static handle from_cpp(const Value&, rv_policy, cleanup_list*) noexcept {
    PyErr_SetString(PyExc_TypeError, "turboquant: an array argument is never returned to Python");
    return handle();
  }
};

}  // namespace nanobind::detail
