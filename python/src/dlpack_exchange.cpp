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

const DlpackExchange* look_up(PyTypeObject* type) {
  // TQ_PY_NO_EXCHANGE=1: every array through nanobind's import, as before the
  // tables were used (the overhead benchmark's baseline, python/bench).
  static const bool disabled = std::getenv("TQ_PY_NO_EXCHANGE") != nullptr;
  if (disabled) return nullptr;
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

// A few array types per process (torch.Tensor, numpy.ndarray, ...); past the
// capacity a type is looked up on every call, still correctly.
struct TypeMemo {
  std::array<std::pair<PyTypeObject*, const DlpackExchange*>, 16> entries{};
  std::size_t used = 0;
};

}  // namespace

const DlpackExchange* exchange_table(PyTypeObject* type) {
  static TypeMemo memo;  // guarded by the GIL: nothing below releases it between the scan and the insert
  for (std::size_t i = 0; i < memo.used; ++i) {
    if (memo.entries[i].first == type) return memo.entries[i].second;
  }
  const DlpackExchange* table = look_up(type);
  for (std::size_t i = 0; i < memo.used; ++i) {  // the lookup may have run Python code (a descriptor)
    if (memo.entries[i].first == type) return memo.entries[i].second;
  }
  if (memo.used < memo.entries.size()) {
    Py_INCREF(type);
    memo.entries[memo.used++] = {type, table};
  }
  return table;
}

std::optional<nanobind::dlpack::dltensor> borrow_dltensor(PyObject* obj, const DlpackExchange** table) {
  const DlpackExchange* t = exchange_table(Py_TYPE(obj));
  if (t == nullptr) return std::nullopt;
  nanobind::dlpack::dltensor view;
  if (t->dltensor_from_py_object_no_sync(obj, &view) != 0) {
    PyErr_Clear();  // nanobind's import then names the problem
    return std::nullopt;
  }
  *table = t;
  return view;
}

std::uintptr_t producer_cuda_stream(const DlpackExchange& table, int device) {
  void* stream = nullptr;
  if (table.current_work_stream(kDlpackCuda, device, &stream) != 0) throw nanobind::python_error();
  return reinterpret_cast<std::uintptr_t>(stream);
}

}  // namespace tqpy
