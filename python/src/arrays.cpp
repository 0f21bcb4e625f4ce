#include "arrays.hpp"

#include <stdexcept>

namespace tqpy {
namespace {

namespace dl = nb::dlpack;

std::optional<Elem> elem_of(dl::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<dl::dtype_code>(t.code);
  if (code == dl::dtype_code::Float) {
    if (t.bits == 32) return Elem::kFloat32;
    if (t.bits == 16) return Elem::kFloat16;
    if (t.bits == 64) return Elem::kFloat64;
  }
  if (code == dl::dtype_code::Bfloat && t.bits == 16) return Elem::kBFloat16;
  if (code == dl::dtype_code::UInt && t.bits == 8) return Elem::kUInt8;
  if (code == dl::dtype_code::Int && t.bits == 32) return Elem::kInt32;
  if (code == dl::dtype_code::Int && t.bits == 64) return Elem::kInt64;
  return std::nullopt;
}

std::string dtype_string(dl::dtype t) {
  if (auto e = elem_of(t)) return elem_name(*e);
  static constexpr const char* kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string code = t.code < 7 ? kCodes[t.code] : "dlpack code " + std::to_string(t.code);
  return code + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

std::string allowed_string(std::initializer_list<Elem> allowed) {
  std::string s;
  std::size_t i = 0;
  for (Elem e : allowed) {
    if (i > 0) s += i + 1 == allowed.size() ? (allowed.size() > 2 ? ", or " : " or ") : ", ";
    s += elem_name(e);
    ++i;
  }
  return s;
}

template <class Array>
ArrayArg checked(const char* name, const Array& a, std::initializer_list<Elem> allowed,
                 std::initializer_list<std::int64_t> shape, std::initializer_list<const char*> dim_names) {
  ArrayArg r;
  r.name = name;
  const std::optional<Elem> elem = elem_of(a.dtype());
  bool ok = false;
  for (Elem e : allowed) ok = ok || (elem && *elem == e);
  if (!ok) {
    throw nb::type_error((r.name + ": dtype " + dtype_string(a.dtype()) + " is not " +
                          (allowed.size() > 1 ? "one of " : "") + allowed_string(allowed))
                             .c_str());
  }
  r.elem = *elem;
  if (a.ndim() != shape.size()) {
    std::vector<std::int64_t> got(a.ndim());
    for (std::size_t i = 0; i < a.ndim(); ++i) got[i] = static_cast<std::int64_t>(a.shape(i));
    std::string names;
    for (const char* n : dim_names) names += (names.empty() ? "" : ", ") + std::string(n);
    throw nb::value_error((r.name + ": shape " + shape_string(got.data(), got.size()) + " has " +
                           std::to_string(a.ndim()) + " dimensions, expected " + std::to_string(shape.size()) + " [" +
                           names + "]")
                              .c_str());
  }
  if (shape.size() > ArrayArg::kMaxDims) throw std::logic_error(r.name + ": more dimensions than ArrayArg holds");
  r.ndim = shape.size();
  for (std::size_t i = 0; i < r.ndim; ++i) r.shape[i] = static_cast<std::int64_t>(a.shape(i));
  std::size_t i = 0;
  auto dim_name = dim_names.begin();
  for (std::int64_t want : shape) {
    if (want >= 0 && r.shape[i] != want) {
      throw nb::value_error((r.name + ": shape " + shape_string(r.shape.data(), r.ndim) + ": dimension " +
                             std::to_string(i) + " (" + *dim_name + ") is " + std::to_string(r.shape[i]) +
                             ", expected " + std::to_string(want))
                                .c_str());
    }
    ++i, ++dim_name;
  }
  // C order, element strides (size-1 dimensions may have any stride; an empty
  // array has no elements to misplace, and numpy gives it stride 0).
  std::int64_t expected = 1;
  const bool empty = a.size() == 0;
  for (std::size_t d = a.ndim(); d-- > 0 && !empty;) {
    if (r.shape[d] != 1 && a.stride(d) != expected) {
      throw nb::value_error((r.name + ": not C-contiguous (shape " + shape_string(r.shape.data(), r.ndim) + ", stride " +
                             std::to_string(a.stride(d)) + " in dimension " + std::to_string(d) + ", expected " +
                             std::to_string(expected) + "); pass a contiguous copy (numpy.ascontiguousarray, "
                             "tensor.contiguous())")
                                .c_str());
    }
    expected *= r.shape[d];
  }
  const int type = a.device_type();
  if (type == nb::device::cpu::value) {
    r.device = Device{};
  } else if (type == nb::device::cuda::value) {
    r.device = Device{true, a.device_id()};
  } else {
    throw nb::value_error((r.name + ": arrays on DLPack device type " + std::to_string(type) +
                           " are not supported (CPU and CUDA arrays are)")
                              .c_str());
  }
  r.data = a.data();
  r.bytes = a.nbytes();
  return r;
}

}  // namespace

std::string Device::name() const { return cuda ? "cuda:" + std::to_string(id) : "cpu"; }

const char* elem_name(Elem e) {
  switch (e) {
    case Elem::kFloat32: return "float32";
    case Elem::kFloat16: return "float16";
    case Elem::kBFloat16: return "bfloat16";
    case Elem::kFloat64: return "float64";
    case Elem::kUInt8: return "uint8";
    case Elem::kInt32: return "int32";
    case Elem::kInt64: return "int64";
  }
  return "?";
}

std::int64_t ArrayArg::size() const {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

turboquant::DType ArrayArg::dtype() const {
  switch (elem) {
    case Elem::kFloat16: return turboquant::DType::kFloat16;
    case Elem::kBFloat16: return turboquant::DType::kBFloat16;
    default: return turboquant::DType::kFloat32;
  }
}

ArrayArg in_array(const char* name, const InArray& a, std::initializer_list<Elem> allowed,
                  std::initializer_list<std::int64_t> shape, std::initializer_list<const char*> dim_names) {
  return checked(name, a, allowed, shape, dim_names);
}

ArrayArg out_array(const char* name, const OutArray& a, std::initializer_list<Elem> allowed,
                   std::initializer_list<std::int64_t> shape, std::initializer_list<const char*> dim_names) {
  ArrayArg r = checked(name, a, allowed, shape, dim_names);
  r.mutable_data = a.data();
  return r;
}

Device common_device(std::initializer_list<const ArrayArg*> args) {
  const ArrayArg* first = nullptr;
  for (const ArrayArg* a : args) {
    if (a == nullptr) continue;
    if (first == nullptr) {
      first = a;
    } else if (!(a->device == first->device)) {
      throw nb::value_error((a->name + " is on " + a->device.name() + " but " + first->name + " is on " +
                             first->device.name() + ": every array of a call must be on one device")
                                .c_str());
    }
  }
  return first ? first->device : Device{};
}

std::int64_t ArrayArg::dim(int i) const {
  if (i < 0 || static_cast<std::size_t>(i) >= ndim) throw std::out_of_range(name + ": no dimension " + std::to_string(i));
  return shape[static_cast<std::size_t>(i)];
}

std::string shape_string(const std::int64_t* dims, std::size_t ndim) {
  std::string s = "[";
  for (std::size_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace tqpy
