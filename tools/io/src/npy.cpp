// .npy format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//   "\x93NUMPY" major minor | header length (u16 LE for 1.0, u32 LE for 2.0/3.0)
//   | header: a Python dict literal {descr, fortran_order, shape}, space-padded,
//     ending in '\n' | raw C-order element data.
#include "turboquant/io/npy.hpp"

#include <bit>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <limits>

#include "npy_header.hpp"
#include "turboquant/core/half.hpp"

// Element bytes are copied as they are: the files are little endian.
static_assert(std::endian::native == std::endian::little, "turboquant::io assumes a little-endian host");

namespace turboquant::io {
namespace {

constexpr std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::int64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();

Status err(StatusCode code, const std::string& name, const std::string& what) {
  return Status(code, name + ": " + what);
}

std::string hex_bytes(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : bytes) {
    if (!s.empty()) s += ' ';
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::uint32_t load_le(const std::uint8_t* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Where the header text lies, from the fixed-size preamble. `prefix` holds the
// first min(file_size, 12) bytes.
struct Preamble {
  int major = 0;
  std::uint64_t header_start = 0;
  std::uint64_t header_len = 0;
};

Status parse_preamble(std::span<const std::uint8_t> prefix, std::uint64_t file_size, const std::string& name,
                      Preamble* out) {
  if (file_size == 0) return err(StatusCode::kBufferTooSmall, name, "empty file (0 bytes), not a .npy file");
  const std::size_t magic_seen = std::min<std::size_t>(prefix.size(), sizeof(kMagic));
  if (std::memcmp(prefix.data(), kMagic, magic_seen) != 0) {
    return err(StatusCode::kInvalidArgument, name,
               "bad magic: file starts with " + hex_bytes(prefix.first(magic_seen)) +
                   ", expected 93 4e 55 4d 50 59 (\\x93NUMPY): not a .npy file");
  }
  if (file_size < 10) {
    return err(StatusCode::kBufferTooSmall, name,
               "truncated: " + std::to_string(file_size) + " bytes, shorter than the 10-byte .npy preamble");
  }
  const int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0) {
    return err(StatusCode::kInvalidArgument, name,
               "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (expected 1.0, 2.0 or 3.0)");
  }
  const int len_bytes = major == 1 ? 2 : 4;
  if (file_size < static_cast<std::uint64_t>(8 + len_bytes)) {
    return err(StatusCode::kBufferTooSmall, name,
               "truncated: " + std::to_string(file_size) + " bytes, shorter than the " + std::to_string(8 + len_bytes) +
                   "-byte preamble of .npy version " + std::to_string(major) + ".0");
  }
  out->major = major;
  out->header_start = 8 + len_bytes;
  out->header_len = load_le(prefix.data() + 8, len_bytes);
  if (out->header_len == 0) return err(StatusCode::kInvalidArgument, name, "malformed header: header length is 0");
  if (file_size - out->header_start < out->header_len) {
    return err(StatusCode::kBufferTooSmall, name,
               "truncated: header length says " + std::to_string(out->header_len) + " bytes of header, file has " +
                   std::to_string(file_size - out->header_start) + " after the " + std::to_string(out->header_start) +
                   "-byte preamble");
  }
  return Status();
}

// Checks dims and that product(shape) * itemsize fits in int64 (zero-size dims
// excepted from the product so that (0, 2^62) is not a way around the check).
Status shape_bytes(NpyDType dtype, std::span<const std::int64_t> shape, const std::string& name, std::int64_t* bytes) {
  std::int64_t nonzero = static_cast<std::int64_t>(npy_dtype_size(dtype));
  bool any_zero = false;
  for (std::int64_t d : shape) {
    if (d < 0) {
      return err(StatusCode::kInvalidArgument, name, "shape " + format_shape(shape) + " has a negative dimension");
    }
    if (d == 0) {
      any_zero = true;
    } else if (nonzero > kMaxBytes / d) {
      return err(StatusCode::kOutOfRange, name,
                 "shape " + format_shape(shape) + " " + npy_dtype_name(dtype) + " overflows: more than 2^63 bytes");
    } else {
      nonzero *= d;
    }
  }
  *bytes = any_zero ? 0 : nonzero;
  return Status();
}

Status check_data_size(const NpyArray& a, std::int64_t data_bytes_in_file, const std::string& name,
                       std::int64_t* need) {
  if (Status s = shape_bytes(a.dtype, a.shape, name, need); !s.ok()) return s;
  if (data_bytes_in_file == *need) return Status();
  const bool short_file = data_bytes_in_file < *need;
  return err(short_file ? StatusCode::kBufferTooSmall : StatusCode::kInvalidArgument, name,
             std::string(short_file ? "truncated" : "trailing bytes") + ": header says shape " + a.shape_string() +
                 " " + npy_dtype_name(a.dtype) + " = " + std::to_string(*need) + " bytes of data, file has " +
                 std::to_string(data_bytes_in_file));
}

// An array built by hand may not match its own shape; conversions check first.
Status check_array(const NpyArray& a, const std::string& name) {
  std::int64_t need = 0;
  if (Status s = shape_bytes(a.dtype, a.shape, name, &need); !s.ok()) return s;
  if (static_cast<std::int64_t>(a.data.size()) != need) {
    return err(StatusCode::kInvalidArgument, name,
               "data has " + std::to_string(a.data.size()) + " bytes, shape " + a.shape_string() + " " +
                   npy_dtype_name(a.dtype) + " needs " + std::to_string(need));
  }
  return Status();
}

template <class T>
T load(const NpyArray& a, std::size_t i) {
  T v;
  std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

Status wrong_kind(const NpyArray& a, const char* wanted) {
  return err(StatusCode::kInvalidArgument, a.name(),
             std::string("dtype ") + npy_dtype_name(a.dtype) + " cannot be read as " + wanted);
}

template <class Out, class Convert>
void convert_all(const NpyArray& a, std::vector<Out>* out, Convert convert) {
  const std::size_t n = static_cast<std::size_t>(a.element_count());
  out->resize(n);
  for (std::size_t i = 0; i < n; ++i) (*out)[i] = convert(i);
}

template <class Float>
Status to_float(const NpyArray& a, std::vector<Float>* out, const char* wanted) {
  if (Status s = check_array(a, a.name()); !s.ok()) return s;
  switch (a.dtype) {
    case NpyDType::kFloat32: convert_all(a, out, [&](std::size_t i) { return Float(load<float>(a, i)); }); break;
    case NpyDType::kFloat64: convert_all(a, out, [&](std::size_t i) { return Float(load<double>(a, i)); }); break;
    case NpyDType::kFloat16:
      convert_all(a, out, [&](std::size_t i) { return Float(core::fp16_to_float(load<std::uint16_t>(a, i))); });
      break;
    default: return wrong_kind(a, wanted);
  }
  return Status();
}

template <class Int>
Status to_int(const NpyArray& a, std::vector<Int>* out, const char* wanted) {
  if (Status s = check_array(a, a.name()); !s.ok()) return s;
  std::int64_t (*get)(const NpyArray&, std::size_t) = nullptr;
  switch (a.dtype) {
    case NpyDType::kInt32:
      get = [](const NpyArray& x, std::size_t i) -> std::int64_t { return load<std::int32_t>(x, i); };
      break;
    case NpyDType::kInt64: get = [](const NpyArray& x, std::size_t i) { return load<std::int64_t>(x, i); }; break;
    case NpyDType::kUInt8:
      get = [](const NpyArray& x, std::size_t i) -> std::int64_t { return load<std::uint8_t>(x, i); };
      break;
    default: return wrong_kind(a, wanted);
  }
  const std::size_t n = static_cast<std::size_t>(a.element_count());
  out->resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = get(a, i);
    if (v < std::numeric_limits<Int>::min() || v > std::numeric_limits<Int>::max()) {
      return err(StatusCode::kOutOfRange, a.name(),
                 "element " + std::to_string(i) + " = " + std::to_string(v) + " does not fit in " + wanted);
    }
    (*out)[i] = static_cast<Int>(v);
  }
  return Status();
}

}  // namespace

std::size_t npy_dtype_size(NpyDType t) {
  switch (t) {
    case NpyDType::kFloat32: return 4;
    case NpyDType::kFloat16: return 2;
    case NpyDType::kFloat64: return 8;
    case NpyDType::kInt32: return 4;
    case NpyDType::kInt64: return 8;
    case NpyDType::kUInt8: return 1;
  }
  return 0;
}

const char* npy_dtype_descr(NpyDType t) {
  switch (t) {
    case NpyDType::kFloat32: return "<f4";
    case NpyDType::kFloat16: return "<f2";
    case NpyDType::kFloat64: return "<f8";
    case NpyDType::kInt32: return "<i4";
    case NpyDType::kInt64: return "<i8";
    case NpyDType::kUInt8: return "|u1";
  }
  return "?";
}

const char* npy_dtype_name(NpyDType t) {
  switch (t) {
    case NpyDType::kFloat32: return "float32";
    case NpyDType::kFloat16: return "float16";
    case NpyDType::kFloat64: return "float64";
    case NpyDType::kInt32: return "int32";
    case NpyDType::kInt64: return "int64";
    case NpyDType::kUInt8: return "uint8";
  }
  return "?";
}

std::optional<NpyDType> npy_dtype_from_descr(std::string_view descr) {
  for (NpyDType t : {NpyDType::kFloat32, NpyDType::kFloat16, NpyDType::kFloat64, NpyDType::kInt32, NpyDType::kInt64,
                     NpyDType::kUInt8}) {
    if (descr == npy_dtype_descr(t)) return t;
  }
  if (descr == "<u1") return NpyDType::kUInt8;  // byte order is moot for one byte
  return std::nullopt;
}

std::int64_t NpyArray::element_count() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::string NpyArray::shape_string() const { return format_shape(shape); }

const std::string& NpyArray::name() const {
  static const std::string kUnnamed = "array";
  return source.empty() ? kUnnamed : source;
}

NpyArray make_npy_fp16(std::vector<std::int64_t> shape, std::span<const std::uint16_t> bits) {
  NpyArray a;
  a.dtype = NpyDType::kFloat16;
  a.shape = std::move(shape);
  a.data.resize(bits.size_bytes());
  if (!bits.empty()) std::memcpy(a.data.data(), bits.data(), bits.size_bytes());
  return a;
}

Status parse_npy(std::span<const std::uint8_t> bytes, const std::string& name, NpyArray* out) {
  Preamble pre;
  if (Status s = parse_preamble(bytes.first(std::min<std::size_t>(bytes.size(), 12)), bytes.size(), name, &pre);
      !s.ok()) {
    return s;
  }
  const auto* text = reinterpret_cast<const char*>(bytes.data() + pre.header_start);
  NpyHeader header;
  if (Status s = parse_npy_header(std::string_view(text, pre.header_len), name, &header); !s.ok()) return s;
  out->dtype = header.dtype;
  out->shape = std::move(header.shape);
  out->source = name;
  const std::uint64_t data_start = pre.header_start + pre.header_len;
  std::int64_t need = 0;
  if (Status s = check_data_size(*out, static_cast<std::int64_t>(bytes.size() - data_start), name, &need); !s.ok()) {
    return s;
  }
  out->data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start), bytes.end());
  return Status();
}

Status read_npy(const std::string& path, NpyArray* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return err(StatusCode::kInvalidArgument, path, "no such file");
  if (fs::is_directory(st)) return err(StatusCode::kInvalidArgument, path, "is a directory, not a .npy file");
  if (!fs::is_regular_file(st)) return err(StatusCode::kInvalidArgument, path, "not a regular file");
  const std::uintmax_t file_size = fs::file_size(path, ec);
  if (ec) return err(StatusCode::kInvalidArgument, path, "cannot read its size: " + ec.message());

  std::ifstream f(path, std::ios::binary);
  if (!f) return err(StatusCode::kInvalidArgument, path, std::string("cannot open: ") + std::strerror(errno));
  std::uint8_t prefix[12] = {};
  const std::size_t prefix_len = static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, sizeof(prefix)));
  f.read(reinterpret_cast<char*>(prefix), static_cast<std::streamsize>(prefix_len));
  if (static_cast<std::size_t>(f.gcount()) != prefix_len) return err(StatusCode::kInvalidArgument, path, "read failed");
  Preamble pre;
  if (Status s = parse_preamble(std::span(prefix, prefix_len), file_size, path, &pre); !s.ok()) return s;

  std::string text(pre.header_len, '\0');
  f.seekg(static_cast<std::streamoff>(pre.header_start));
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (static_cast<std::uint64_t>(f.gcount()) != pre.header_len) {
    return err(StatusCode::kBufferTooSmall, path, "truncated while reading the header");
  }
  NpyHeader header;
  if (Status s = parse_npy_header(text, path, &header); !s.ok()) return s;
  out->dtype = header.dtype;
  out->shape = std::move(header.shape);
  out->source = path;

  // The size is checked before allocating, so a lying header cannot ask for 2^62 bytes.
  const std::uint64_t data_start = pre.header_start + pre.header_len;
  std::int64_t need = 0;
  if (Status s = check_data_size(*out, static_cast<std::int64_t>(file_size - data_start), path, &need); !s.ok()) {
    return s;
  }
  out->data.resize(static_cast<std::size_t>(need));
  f.read(reinterpret_cast<char*>(out->data.data()), static_cast<std::streamsize>(need));
  // Re-checked on the stream: the file may have changed since its size was taken.
  if (f.gcount() != need) return err(StatusCode::kBufferTooSmall, path, "truncated while reading the data");
  if (f.peek() != std::char_traits<char>::eof()) {
    return err(StatusCode::kInvalidArgument, path, "trailing bytes after the data");
  }
  return Status();
}

namespace {
Status serialize(const NpyArray& a, const std::string& name, std::vector<std::uint8_t>* out) {
  if (Status s = check_array(a, name); !s.ok()) return s;
  std::string dict = std::string("{'descr': '") + npy_dtype_descr(a.dtype) +
                     "', 'fortran_order': False, 'shape': " + a.shape_string() + ", }";
  // Pad with spaces so that preamble + header + '\n' is a multiple of 64.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 0xffff) return err(StatusCode::kInvalidArgument, name, "header too long for .npy 1.0");
  out->clear();
  out->reserve(10 + dict.size() + a.data.size());
  out->insert(out->end(), kMagic, kMagic + sizeof(kMagic));
  out->push_back(1);
  out->push_back(0);
  out->push_back(static_cast<std::uint8_t>(dict.size() & 0xff));
  out->push_back(static_cast<std::uint8_t>(dict.size() >> 8));
  out->insert(out->end(), dict.begin(), dict.end());
  out->insert(out->end(), a.data.begin(), a.data.end());
  return Status();
}
}  // namespace

Status serialize_npy(const NpyArray& a, std::vector<std::uint8_t>* out) { return serialize(a, a.name(), out); }

Status write_npy(const std::string& path, const NpyArray& a) {
  std::vector<std::uint8_t> bytes;
  if (Status s = serialize(a, path, &bytes); !s.ok()) return s;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    return err(StatusCode::kInvalidArgument, path, std::string("cannot open for writing: ") + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return err(StatusCode::kInvalidArgument, path, "write failed");
  return Status();
}

Status to_float32(const NpyArray& a, std::vector<float>* out) { return to_float(a, out, "float32"); }
Status to_float64(const NpyArray& a, std::vector<double>* out) { return to_float(a, out, "float64"); }
Status to_int64(const NpyArray& a, std::vector<std::int64_t>* out) { return to_int(a, out, "int64"); }
Status to_int32(const NpyArray& a, std::vector<std::int32_t>* out) { return to_int(a, out, "int32"); }

}  // namespace turboquant::io
