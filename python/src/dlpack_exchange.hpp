// DLPack's C exchange table (DLPack 1.2+, `__dlpack_c_exchange_api__` on an
// array type; torch.Tensor has it since torch 2.10): C functions that describe
// an array object as a DLTensor and name the producer's current work stream,
// with no capsule, no allocation and no Python call. The extension borrows
// arrays through it where their type publishes it (docs/PERFORMANCE.md: the
// Python per-call overhead); every other array goes through nanobind's DLPack /
// buffer-protocol import.
//
// The declarations are the ABI of dlpack.h (DLPack 1.x: the major version must
// match, fields are only ever appended); DLTensor is nanobind's declaration of
// the same struct.
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

// The exchange table of `type` when it publishes a usable one (DLPack major
// version 1, both functions above present), else null. Looked up once per
// type and remembered (the type is kept alive, so its address stays its own).
// Call with the GIL held.
const DlpackExchange* exchange_table(PyTypeObject* type);

// `obj` described through its type's exchange table; nullopt (and no Python
// error left set) when the type has none or the producer refuses the object.
std::optional<nanobind::dlpack::dltensor> borrow_dltensor(PyObject* obj, const DlpackExchange** table);

// The current CUDA stream of `table`'s producer on `device` (a cudaStream_t as
// an integer; 0 is the legacy default stream). Throws (the producer's Python
// error) when the producer cannot say.
std::uintptr_t producer_cuda_stream(const DlpackExchange& table, int device);

}  // namespace tqpy
