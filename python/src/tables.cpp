#include "tables.hpp"

#include <vector>

#include "errors.hpp"

namespace tqpy {

std::optional<turboquant::Codebook> caller_codebook(const PyLayout& l, const std::optional<InArray>& centroids) {
  if (!centroids) return std::nullopt;
  const int bits = l.layout.format.fp8_keys() ? l.layout.format.value_bits : l.layout.format.key_bits;
  const ArrayArg c = in_array("centroids", *centroids, {Elem::kFloat32}, {1 << bits}, {"2^key_bits"});
  if (c.device.cuda) throw_value_error("centroids: must be a CPU array (it is copied into the kernel parameters)");
  const auto* p = static_cast<const float*>(c.data);
  turboquant::Codebook cb;
  check(turboquant::make_codebook(bits, std::vector<float>(p, p + c.size()), &cb), "centroids");
  return cb;
}

std::optional<ArrayArg> caller_rotation(const PyLayout& l, const std::optional<InArray>& rotation) {
  if (!rotation) return std::nullopt;
  const int D = l.layout.format.head_dim;
  return in_array("rotation", *rotation, {Elem::kFloat32}, {D, D}, {"head_dim", "head_dim"});
}

}  // namespace tqpy
