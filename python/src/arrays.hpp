// Arrays from Python (numpy, torch, CuPy, JAX: anything nanobind takes through
// DLPack or the buffer protocol), checked the way the library checks its own
// arguments: every problem is an exception whose message names the argument
// and the value ("query: dtype float64 is not one of float32, float16,
// bfloat16"). The library then sees plain pointers and byte counts.
#pragma once

#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "turboquant/dtype.hpp"

namespace tqpy {

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro>;  // read by the library
using OutArray = nb::ndarray<>;       // written by the library

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
  std::vector<std::int64_t> shape;
  Device device;
  std::size_t bytes = 0;

  std::int64_t dim(int i) const { return shape.at(static_cast<std::size_t>(i)); }
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
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace tqpy
