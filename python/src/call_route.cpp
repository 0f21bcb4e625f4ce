#include "call_route.hpp"

#include <climits>

#include "errors.hpp"
#include "turboquant/cpu.hpp"

namespace tqpy {
namespace {

const char* kBackendChoices = "'cpu-ref', 'cpu', 'cpu:scalar', 'cpu:avx2', 'cpu:avx512', 'cuda', 'cuda-strict'";

}  // namespace

Route route(const std::string& backend, const Device& device, const ArrayArg& first) {
  Route r;
  r.name = backend;
  if (backend.empty()) {
    r.name = device.cuda ? "cuda" : "cpu";
  }
  const std::string& b = r.name;
  if (b == "cuda" || b == "cuda:fast" || b == "cuda-strict" || b == "cuda:strict") {
    r.cuda = true;
    r.fast = b == "cuda" || b == "cuda:fast";
    if (!device.cuda) {
      throw_value_error("backend = '" + b + "' runs on CUDA arrays, but " + first.name +
                        " is a CPU array (move the arrays to the GPU, or use backend='cpu')");
    }
    return r;
  }
  const std::string registry_name = b == "cpu" ? turboquant::cpu_backend_name() : b;
  r.host = turboquant::find_backend(registry_name);
  if (r.host == nullptr || registry_name.rfind("cuda", 0) == 0) {
    throw_value_error("backend = '" + b + "' is not one of " + kBackendChoices);
  }
  if (device.cuda) {
    throw_value_error("backend = '" + b + "' runs on CPU arrays, but " + first.name + " is on " + device.name() +
                      " (use backend='cuda' or 'cuda-strict', or pass CPU arrays)");
  }
  check(r.host->status(), "backend '" + b + "'");
  return r;
}

int as_int(const char* what, std::int64_t v) {
  if (v > INT_MAX) throw_value_error(std::string(what) + " = " + std::to_string(v) + " exceeds 2^31 - 1");
  return static_cast<int>(v);
}

turboquant::ConstCacheView cache_view(const PyLayout& l, const ArrayArg& cache) {
  return {l.layout, static_cast<const std::uint8_t*>(cache.data), cache.dim(0)};
}

turboquant::BackendOptions host_options(int threads) {
  if (threads < 0) throw_value_error("threads = " + std::to_string(threads) + " must be >= 0 (0: all)");
  return turboquant::BackendOptions{threads};
}

void bind_routes(nb::module_& m) {
  m.def(
      "_array_route",
      [](nb::handle type) {
        if (!PyType_Check(type.ptr())) throw nb::type_error("_array_route: expected a type");
        return route_name(array_route(reinterpret_cast<PyTypeObject*>(type.ptr())));
      },
      nb::arg("type"),
      "How arrays of `type` reach the extension: 'exchange' (DLPack's C exchange table: no capsule), "
      "'exchange-inputs' (the table for inputs; outputs through nanobind's import, which honours read-only "
      "arrays), 'torch-capsule' (torch's C exporter) or 'import' (nanobind: DLPack, buffer protocol).");
  m.def(
      "_current_stream",
      [](const InArray& a) {
        return call_stream(std::nullopt, Device{a.device_type() == nb::device::cuda::value, a.device_id()}, a);
      },
      nb::arg("array"), "The stream a call on `array` runs on when the Python layer passes stream=None (tests).");
}

}  // namespace tqpy
