// How the arrays of each Python type reach the extension, and whose current
// CUDA stream a call on them runs on (docs/PERFORMANCE.md: the Python per-call
// overhead). Three routes, chosen once per type:
// - kExchange: the type publishes DLPack's C exchange table (DLPack 1.2+,
//   `__dlpack_c_exchange_api__`; torch.Tensor since torch 2.10): C functions
//   that describe the array as a DLTensor and name the producer's current
//   stream, with no capsule, no allocation and no Python call;
// - kTorchCapsule: a torch.Tensor of a torch without that table: its capsule
//   from torch's C exporter (torch._C._to_dlpack; `Tensor.__dlpack__` records
//   and waits on a CUDA event off the legacy default stream, which a call on
//   the caller's stream does not need) and torch's current raw stream;
// - kImport: everything else through nanobind's import (a DLPack capsule,
//   `__dlpack__`, the buffer protocol); the stream is the caller's (the Python
//   layer passes CuPy's current one), else the legacy default stream.
//
// The table declarations are the ABI of dlpack.h (DLPack 1.x: the major
// version must match; fields are only ever appended); DLTensor is nanobind's
// declaration of the same struct. Everything here runs with the GIL held.
#pragma once

#include <Python.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>

namespace tqpy {

struct DlpackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};

struct DlpackExchangeHeader {
  DlpackVersion version;
  DlpackExchangeHeader* prev_api;  // an older table, or null
};

// Only the two entries the extension calls are typed; the others keep their
// places in the table.
struct DlpackExchange {
  DlpackExchangeHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  // Fills `out` with a view of `py_object` valid until control returns to
  // Python; 0, or -1 with a Python exception set. May be null.
  int (*dltensor_from_py_object_no_sync)(void* py_object, nanobind::dlpack::dltensor* out);
  // The producer's current stream on (device_type, device_id); 0, or -1 with
  // a Python exception set.
  int (*current_work_stream)(std::int32_t device_type, std::int32_t device_id, void** out_stream);
};

struct ArrayRoute {
  enum class Kind { kImport, kExchange, kTorchCapsule };
  Kind kind = Kind::kImport;
  const DlpackExchange* table = nullptr;  // kExchange
  // kExchange: whether the library may write arrays it borrows. A DLTensor says
  // nothing of read-only memory, so outputs are borrowed only from torch, whose
  // tensors are writable; another producer's outputs go through nanobind's
  // import, which honours DLPack's read-only flag.
  bool writable = false;
  PyObject* to_dlpack = nullptr;          // kTorchCapsule: torch._C._to_dlpack (held for the process)
  PyObject* raw_stream = nullptr;         // kTorchCapsule: torch._C._cuda_getCurrentRawStream, if torch has it

  // `obj` as a DLTensor through the table (kExchange); nullopt, with no
  // Python error left set, when the producer refuses it.
  std::optional<nanobind::dlpack::dltensor> borrow(PyObject* obj) const;
  // `obj`'s DLPack capsule from torch (kTorchCapsule); null, with no Python
  // error left set, when torch refuses it.
  PyObject* torch_capsule(PyObject* obj) const;
  // The producer's current CUDA stream on `device` (a cudaStream_t as an
  // integer); 0 for kImport. Throws the producer's Python error.
  std::uintptr_t current_stream(int device) const;
};

// The route of `type`'s arrays, looked up once per type and remembered (the
// type is kept alive, so its address stays its own). TQ_PY_NO_EXCHANGE=1 in
// the environment leaves exchange tables unused (the overhead benchmark's
// baseline: torch tensors then take kTorchCapsule).
ArrayRoute array_route(PyTypeObject* type);

// "exchange", "exchange-inputs" (outputs imported), "torch-capsule", "import"
const char* route_name(const ArrayRoute& route);

}  // namespace tqpy
