#include "dlpack_exchange.hpp"

#include <array>
#include <cstdlib>
#include <utility>

namespace tqpy {
namespace {

constexpr std::int32_t kDlpackCuda = 2;  // DLDeviceType kDLCUDA

// The table an attribute value points to: a capsule named
// "dlpack_exchange_api" (torch) or an integer address (dlpack.h's wording).
const DlpackExchangeHeader* table_address(PyObject* attr) {
  void* p = nullptr;
  if (PyCapsule_CheckExact(attr)) {
    p = PyCapsule_GetPointer(attr, "dlpack_exchange_api");
  } else if (PyLong_Check(attr)) {
    p = PyLong_AsVoidPtr(attr);
  }
  if (p == nullptr) PyErr_Clear();
  return static_cast<const DlpackExchangeHeader*>(p);
}

const DlpackExchange* exchange_table(PyTypeObject* type) {
  // The attribute's name since DLPack 1.3, then its name before (September 2025).
  for (const char* name : {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"}) {
    PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
    if (attr == nullptr) {
      PyErr_Clear();
      continue;
    }
    const DlpackExchangeHeader* h = table_address(attr);
    Py_DECREF(attr);  // the table itself lives as long as the process
    while (h != nullptr && h->version.major != 1) h = h->prev_api;  // the DLTensor ABI this file knows
    const auto* table = reinterpret_cast<const DlpackExchange*>(h);
    if (table != nullptr && table->dltensor_from_py_object_no_sync != nullptr &&
        table->current_work_stream != nullptr) {
      return table;
    }
  }
  return nullptr;
}

// A new reference to object.name, or null with no error set.
PyObject* attribute(PyObject* object, const char* name) {
  PyObject* r = PyObject_GetAttrString(object, name);
  if (r == nullptr) PyErr_Clear();
  return r;
}

// What the torch capsule route needs of torch, taken once torch has been
// imported (nothing here imports it) and kept for the process.
struct TorchExports {
  PyObject* tensor = nullptr;      // torch.Tensor
  PyObject* to_dlpack = nullptr;   // torch._C._to_dlpack
  PyObject* raw_stream = nullptr;  // torch._C._cuda_getCurrentRawStream (absent without CUDA)
};

const TorchExports* torch_exports() {
  static TorchExports exports;
  if (exports.to_dlpack != nullptr) return &exports;
  static PyObject* const name = PyUnicode_InternFromString("torch");
  PyObject* torch = PyImport_GetModule(name);
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* tensor = attribute(torch, "Tensor");
  PyObject* c = attribute(torch, "_C");
  PyObject* to_dlpack = c != nullptr ? attribute(c, "_to_dlpack") : nullptr;
  if (tensor != nullptr && PyType_Check(tensor) && to_dlpack != nullptr) {
    exports = {tensor, to_dlpack, attribute(c, "_cuda_getCurrentRawStream")};
  } else {
    Py_XDECREF(tensor);
    Py_XDECREF(to_dlpack);
  }
  Py_XDECREF(c);
  Py_DECREF(torch);
  return exports.to_dlpack != nullptr ? &exports : nullptr;
}

// torch's exports when `type` is torch.Tensor or a subclass, else null.
const TorchExports* torch_of(PyTypeObject* type) {
  const TorchExports* torch = torch_exports();
  return torch != nullptr && PyType_IsSubtype(type, reinterpret_cast<PyTypeObject*>(torch->tensor)) ? torch
                                                                                                    : nullptr;
}

// kTorchCapsule when `type` is torch.Tensor or a subclass.
std::optional<ArrayRoute> torch_route(PyTypeObject* type) {
  const TorchExports* torch = torch_of(type);
  if (torch == nullptr) return std::nullopt;
  ArrayRoute route;
  route.kind = ArrayRoute::Kind::kTorchCapsule;
  route.to_dlpack = torch->to_dlpack;
  route.raw_stream = torch->raw_stream;
  return route;
}

ArrayRoute look_up(PyTypeObject* type) {
  static const bool no_exchange = std::getenv("TQ_PY_NO_EXCHANGE") != nullptr;
  ArrayRoute route;
  if (!no_exchange) {
    if (const DlpackExchange* table = exchange_table(type)) {
      route.kind = ArrayRoute::Kind::kExchange;
      route.table = table;
      route.writable = torch_of(type) != nullptr;
      return route;
    }
  }
  return torch_route(type).value_or(route);
}

// A few array types per process (torch.Tensor, numpy.ndarray, ...); past the
// capacity a type is looked up on every call, still correctly.
struct TypeMemo {
  std::array<std::pair<PyTypeObject*, ArrayRoute>, 16> entries{};
  std::size_t used = 0;

  const ArrayRoute* find(PyTypeObject* type) const {
    for (std::size_t i = 0; i < used; ++i) {
      if (entries[i].first == type) return &entries[i].second;
    }
    return nullptr;
  }
};

}  // namespace

ArrayRoute array_route(PyTypeObject* type) {
  static TypeMemo memo;  // guarded by the GIL
  if (const ArrayRoute* known = memo.find(type)) return *known;
  const ArrayRoute route = look_up(type);
  if (const ArrayRoute* known = memo.find(type)) return *known;  // the lookup may have run Python code
  if (memo.used < memo.entries.size()) {
    Py_INCREF(type);
    memo.entries[memo.used++] = {type, route};
  }
  return route;
}

const char* route_name(const ArrayRoute& route) {
  switch (route.kind) {
    case ArrayRoute::Kind::kExchange: return route.writable ? "exchange" : "exchange-inputs";
    case ArrayRoute::Kind::kTorchCapsule: return "torch-capsule";
    case ArrayRoute::Kind::kImport: break;
  }
  return "import";
}

std::optional<nanobind::dlpack::dltensor> ArrayRoute::borrow(PyObject* obj) const {
  nanobind::dlpack::dltensor view;
  if (table->dltensor_from_py_object_no_sync(obj, &view) != 0) {
    PyErr_Clear();  // nanobind's import then names the problem
    return std::nullopt;
  }
  return view;
}

PyObject* ArrayRoute::torch_capsule(PyObject* obj) const {
  PyObject* capsule = PyObject_CallOneArg(to_dlpack, obj);
  if (capsule == nullptr) PyErr_Clear();
  return capsule;
}

std::uintptr_t ArrayRoute::current_stream(int device) const {
  switch (kind) {
    case Kind::kExchange: {
      void* stream = nullptr;
      if (table->current_work_stream(kDlpackCuda, device, &stream) != 0) throw nanobind::python_error();
      return reinterpret_cast<std::uintptr_t>(stream);
    }
    case Kind::kTorchCapsule: {
      if (raw_stream == nullptr) break;  // a torch built without CUDA has no CUDA tensors either
      const nanobind::object id = nanobind::steal(PyLong_FromLong(device));
      if (!id.is_valid()) throw nanobind::python_error();
      const nanobind::object s = nanobind::steal(PyObject_CallOneArg(raw_stream, id.ptr()));
      if (!s.is_valid()) throw nanobind::python_error();
      return nanobind::cast<std::uintptr_t>(s);
    }
    case Kind::kImport: break;
  }
  return 0;
}

}  // namespace tqpy
