// turboquant.Layout (the numbers `tq info` prints), codebooks and the backend
// registry.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "bindings.hpp"
#include "errors.hpp"
#include "turboquant/backend.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/cpu.hpp"

namespace tqpy {
namespace {

using turboquant::BlockLayout;
using turboquant::Format;

// What the stored key norm holds (docs/FORMAT.md; tq info's "key_norm_stored").
const char* key_norm_stored(const Format& f) {
  if (f.fp8_keys()) return "none";
  return f.norm_folded_at_store() ? "corrected" : "raw";
}

std::string repr(const PyLayout& p) {
  const BlockLayout& l = p.layout;
  return std::string("turboquant.Layout(preset='") + turboquant::preset_name(p.preset) +
         "', head_dim=" + std::to_string(l.format.head_dim) + ", block_size=" + std::to_string(l.block_size) +
         ", num_kv_heads=" + std::to_string(l.num_kv_heads) + ", layout='" + turboquant::layout_name(l.format.layout) +
         "'" + (l.format.fp8_keys() ? std::string(", fp8_format='") + turboquant::fp8_format_name(l.format.fp8_format) + "'"
                                    : std::string()) +
         ")";
}

}  // namespace

PyLayout make_layout(const std::string& preset, int head_dim, int block_size, int num_kv_heads,
                     const std::string& layout, const std::string& fp8_format) {
  const auto p = turboquant::preset_from_name(preset);
  if (!p) {
    std::string names;
    for (turboquant::Preset q : turboquant::kAllPresets) names += (names.empty() ? "" : ", ") + std::string(turboquant::preset_name(q));
    throw_value_error("preset = '" + preset + "' is not one of " + names + " (or their short names, e.g. '4bit_nc')");
  }
  const auto kind = turboquant::layout_from_name(layout);
  if (!kind) throw_value_error("layout = '" + layout + "' is not one of 'soa', 'aos'");
  const auto fp8 = turboquant::fp8_format_from_name(fp8_format);
  if (!fp8) throw_value_error("fp8_format = '" + fp8_format + "' is not one of 'e4m3', 'e4b15'");
  const Format f = turboquant::preset_format(*p, head_dim, *kind, *fp8);
  if (!f.fp8_keys() && *fp8 != turboquant::Fp8Format::kE4m3) {
    throw_value_error("fp8_format = '" + fp8_format + "': only turboquant_k8v4 has FP8 keys, not " +
                      turboquant::preset_name(*p));
  }
  PyLayout r{*p, BlockLayout{f, block_size, num_kv_heads}};
  check(turboquant::validate_layout(r.layout), "Layout");
  return r;
}

void bind_layout(nb::module_& m) {
  nb::class_<PyLayout>(m, "_Layout",
                       "A TurboQuant cache's format and block layout: the preset, head_dim, block_size, "
                       "num_kv_heads, the byte layout ('soa' or 'aos') and, for k8v4, the FP8 flavour. "
                       "Sizes are those `tq info` prints.")
      // __init__ (not __new__), so that turboquant.Layout can be a Python subclass.
      .def(
          "__init__",
          [](PyLayout* self, const std::string& preset, int head_dim, int block_size, int num_kv_heads,
             const std::string& layout, const std::string& fp8_format) {
            new (self) PyLayout(make_layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format));
          },
          nb::arg("preset"), nb::arg("head_dim"), nb::arg("block_size"), nb::arg("num_kv_heads"),
          nb::arg("layout") = "soa", nb::arg("fp8_format") = "e4m3")
      .def_prop_ro("preset", [](const PyLayout& p) { return turboquant::preset_name(p.preset); })
      .def_prop_ro("head_dim", [](const PyLayout& p) { return p.layout.format.head_dim; })
      .def_prop_ro("block_size", [](const PyLayout& p) { return p.layout.block_size; })
      .def_prop_ro("num_kv_heads", [](const PyLayout& p) { return p.layout.num_kv_heads; })
      .def_prop_ro("layout", [](const PyLayout& p) { return turboquant::layout_name(p.layout.format.layout); })
      .def_prop_ro("fp8_format", [](const PyLayout& p) { return turboquant::fp8_format_name(p.layout.format.fp8_format); })
      .def_prop_ro("key_bits", [](const PyLayout& p) { return p.layout.format.key_bits; })
      .def_prop_ro("value_bits", [](const PyLayout& p) { return p.layout.format.value_bits; })
      .def_prop_ro("norm_correction", [](const PyLayout& p) { return p.layout.format.norm_correction; })
      .def_prop_ro("fp8_keys", [](const PyLayout& p) { return p.layout.format.fp8_keys(); })
      .def_prop_ro("key_norm_stored", [](const PyLayout& p) { return key_norm_stored(p.layout.format); },
                   "'corrected' (SoA: ||k|| / ||c|| folded at store), 'raw' (AoS: ||k||), 'none' (FP8 keys)")
      .def_prop_ro("key_data_bytes", [](const PyLayout& p) { return p.layout.format.key_data_bytes(); })
      .def_prop_ro("value_data_bytes", [](const PyLayout& p) { return p.layout.format.value_data_bytes(); })
      .def_prop_ro("data_bytes", [](const PyLayout& p) { return p.layout.format.data_bytes(); })
      .def_prop_ro("meta_fields", [](const PyLayout& p) { return p.layout.format.meta_fields(); })
      .def_prop_ro("slot_bytes", [](const PyLayout& p) { return p.layout.format.slot_bytes(); })
      .def_prop_ro("slot_bytes_aligned", [](const PyLayout& p) { return p.layout.format.slot_bytes_aligned(); },
                   "bytes per (token, KV head) in the cache tensor: its last dimension")
      .def_prop_ro("key_packed_size",
                   [](const PyLayout& p) {
                     const Format& f = p.layout.format;
                     return f.fp8_keys() ? f.key_data_bytes() : f.key_data_bytes() + 2;
                   },
                   "vLLM's key_packed_size: ceil(D * key_bits / 8) + 2 (FP8 keys: D)")
      .def_prop_ro("value_packed_size", [](const PyLayout& p) { return p.layout.format.value_data_bytes() + 4; },
                   "vLLM's value_packed_size: ceil(D * value_bits / 8) + 4")
      .def_prop_ro("block_bytes", [](const PyLayout& p) { return p.layout.block_bytes(); })
      .def_prop_ro("meta_offset", [](const PyLayout& p) { return p.layout.meta_offset(); },
                   "SoA: where a block's fp16 metadata region starts; AoS: the used bytes of a block")
      .def_prop_ro("compression_vs_bf16", [](const PyLayout& p) { return p.layout.format.compression_vs_bf16(); })
      .def_prop_ro("description", [](const PyLayout& p) { return turboquant::describe(p.layout.format); })
      .def(
          "cache_shape",
          [](const PyLayout& p, std::int64_t num_blocks) {
            if (num_blocks < 0) throw_value_error("num_blocks = " + std::to_string(num_blocks) + " must be >= 0");
            return std::make_tuple(num_blocks, p.layout.block_size, p.layout.num_kv_heads,
                                   p.layout.format.slot_bytes_aligned());
          },
          nb::arg("num_blocks"), "vLLM's kv_cache shape [num_blocks, block_size, num_kv_heads, slot_bytes_aligned] (uint8)")
      .def("__repr__", &repr)
      .def("__eq__", [](const PyLayout& a, const PyLayout& b) {
        return a.preset == b.preset && a.layout.format == b.layout.format && a.layout.block_size == b.layout.block_size &&
               a.layout.num_kv_heads == b.layout.num_kv_heads;
      })
      .def("__hash__", [](const PyLayout& p) { return nb::hash(nb::str(repr(p).c_str())); });

  m.def(
      "_codebook",
      [](int bits, int head_dim) {
        if (bits < 1 || bits > 4) throw_value_error("bits = " + std::to_string(bits) + " must be in 1..4");
        if (head_dim < 1) throw_value_error("head_dim = " + std::to_string(head_dim) + " must be >= 1");
        const turboquant::Codebook& c = turboquant::vllm_codebook(head_dim, bits);
        std::vector<float> centroids(c.centroids, c.centroids + c.size());
        std::vector<float> midpoints(c.midpoints, c.midpoints + c.size() - 1);
        return std::make_tuple(centroids, midpoints);
      },
      nb::arg("bits"), nb::arg("head_dim"));

  m.def("_backends", [] {
    std::vector<std::tuple<std::string, std::string, bool, bool, std::string>> r;
    for (const turboquant::Backend* b : turboquant::backends()) {
      r.emplace_back(std::string(b->name()), std::string(b->description()), b->available(), b->exact_decode(),
                     b->unavailable_reason());
    }
    return r;
  });
  m.def("isas", &turboquant::available_isas, "ISAs this CPU runs, lowest first (e.g. ['scalar', 'avx2'])");
}

}  // namespace tqpy
