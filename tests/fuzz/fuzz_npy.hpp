// Fuzz target: the strict .npy reader (turboquant::io::parse_npy) and the
// conversions the case loader applies to what it returns. Invariants: no
// crash, no sanitizer report; an accepted array holds exactly product(shape) *
// itemsize bytes; serialize -> parse gives the same array back.
#pragma once

#include <span>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "turboquant/io/npy.hpp"

namespace tq_fuzz {

inline int fuzz_npy(const std::uint8_t* data, std::size_t size) {
  namespace io = turboquant::io;
  io::NpyArray a;
  const turboquant::Status s = io::parse_npy(std::span<const std::uint8_t>(data, size), "fuzz.npy", &a);
  if (!s.ok()) {
    if (s.message().rfind("fuzz.npy: ", 0) != 0) fail("npy: error message does not start with the file name");
    return 0;
  }
  if (a.data.size() != a.byte_count()) fail("npy: accepted array's data size != product(shape) * itemsize");

  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  const bool is_float = a.dtype == io::NpyDType::kFloat32 || a.dtype == io::NpyDType::kFloat16 ||
                        a.dtype == io::NpyDType::kFloat64;
  if (io::to_float32(a, &f32).ok() != is_float) fail("npy: to_float32 accepts exactly the float dtypes");
  if (io::to_float64(a, &f64).ok() != is_float) fail("npy: to_float64 accepts exactly the float dtypes");
  if (is_float && (f32.size() != static_cast<std::size_t>(a.element_count()) || f64.size() != f32.size())) {
    fail("npy: float conversion changed the element count");
  }
  (void)io::to_int32(a, &i32);
  if (io::to_int64(a, &i64).ok() == is_float) fail("npy: to_int64 accepts exactly the integer dtypes");

  std::vector<std::uint8_t> bytes;
  if (!io::serialize_npy(a, &bytes).ok()) {
    // Only a header longer than .npy 1.0 allows may fail (64-dim shapes of huge numbers do not fit).
    return 0;
  }
  io::NpyArray b;
  if (!io::parse_npy(bytes, "roundtrip.npy", &b).ok()) fail("npy: our own serialization does not parse");
  if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data) fail("npy: serialize -> parse changed the array");
  return 0;
}

}  // namespace tq_fuzz
