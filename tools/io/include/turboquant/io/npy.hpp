// A strict reader and writer for NumPy .npy files (format versions 1.0, 2.0
// and 3.0), limited to the little-endian C-order dtypes the case directories
// use. Strict because the files are test oracles: a truncated or mislabelled
// file must fail loudly with the path and the bad value, never be half-read.
//
// Status codes: kBufferTooSmall for truncated files, kOutOfRange for shapes
// whose byte size overflows, kUnsupported for valid .npy features this reader
// does not handle (big-endian or other dtypes, fortran_order True),
// kInvalidArgument for everything else (missing file, bad magic or header,
// trailing bytes, wrong dtype for a conversion, a value that does not fit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "turboquant/status.hpp"

namespace turboquant::io {

enum class NpyDType : std::uint8_t { kFloat32, kFloat16, kFloat64, kInt32, kInt64, kUInt8 };

std::size_t npy_dtype_size(NpyDType t);
// NumPy's descr string as written: "<f4", "<f2", "<f8", "<i4", "<i8", "|u1".
const char* npy_dtype_descr(NpyDType t);
// "float32", "float16", "float64", "int32", "int64", "uint8".
const char* npy_dtype_name(NpyDType t);
// The descr strings above (and "<u1", which some writers use for uint8).
std::optional<NpyDType> npy_dtype_from_descr(std::string_view descr);

template <class T>
struct NpyDTypeOf;
template <>
struct NpyDTypeOf<float> {
  static constexpr NpyDType value = NpyDType::kFloat32;
};
template <>
struct NpyDTypeOf<double> {
  static constexpr NpyDType value = NpyDType::kFloat64;
};
template <>
struct NpyDTypeOf<std::int32_t> {
  static constexpr NpyDType value = NpyDType::kInt32;
};
template <>
struct NpyDTypeOf<std::int64_t> {
  static constexpr NpyDType value = NpyDType::kInt64;
};
template <>
struct NpyDTypeOf<std::uint8_t> {
  static constexpr NpyDType value = NpyDType::kUInt8;
};

// An n-d array in C order. `data` holds the raw little-endian element bytes
// (product(shape) * itemsize of them); a 0-d array (empty shape) has one element.
struct NpyArray {
  NpyDType dtype = NpyDType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;
  // Where the array came from (the path for read_npy); prefixes the messages
  // of the conversion helpers. Empty means "array".
  std::string source;

  int ndim() const { return static_cast<int>(shape.size()); }
  std::size_t itemsize() const { return npy_dtype_size(dtype); }
  // product(shape); assumes a shape that passed validation (read_npy does that).
  std::int64_t element_count() const;
  std::size_t byte_count() const { return static_cast<std::size_t>(element_count()) * itemsize(); }
  // "(3, 8, 128)", "(16,)", "()": Python's spelling, as in the header.
  std::string shape_string() const;
  const std::string& name() const;
};

// "(3, 8, 128)" for any shape vector (shared by the case loader's messages).
std::string format_shape(std::span<const std::int64_t> shape);

// Builds an array from typed values in C order. The element count is not
// checked here; write_npy rejects an array whose data does not match its shape.
template <class T>
NpyArray make_npy(std::vector<std::int64_t> shape, std::span<const T> values) {
  NpyArray a;
  a.dtype = NpyDTypeOf<T>::value;
  a.shape = std::move(shape);
  a.data.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), values.size_bytes());
  return a;
}
template <class T>
NpyArray make_npy(std::vector<std::int64_t> shape, const std::vector<T>& values) {
  return make_npy<T>(std::move(shape), std::span<const T>(values));
}
// float16 from raw IEEE binary16 bit patterns.
NpyArray make_npy_fp16(std::vector<std::int64_t> shape, std::span<const std::uint16_t> bits);

// Reads `path`. On error `*out` is left unspecified and the message starts
// with the path.
Status read_npy(const std::string& path, NpyArray* out);
// Parses a whole .npy file held in memory; `name` prefixes the messages.
Status parse_npy(std::span<const std::uint8_t> bytes, const std::string& name, NpyArray* out);

// Writes version 1.0 with the header padded so that the data starts at a
// multiple of 64 bytes (as numpy does). Rejects an array whose data size does
// not match its shape.
Status write_npy(const std::string& path, const NpyArray& array);
// The same bytes write_npy would write.
Status serialize_npy(const NpyArray& array, std::vector<std::uint8_t>* out);

// Conversions. Floats accept float32, float16 (exact, via core::fp16_to_float)
// and float64 (rounded to nearest for float32). Integers accept int32, int64
// and uint8; a value outside the target type is an error naming its index.
Status to_float32(const NpyArray& a, std::vector<float>* out);
Status to_float64(const NpyArray& a, std::vector<double>* out);
Status to_int64(const NpyArray& a, std::vector<std::int64_t>* out);
Status to_int32(const NpyArray& a, std::vector<std::int32_t>* out);

}  // namespace turboquant::io
