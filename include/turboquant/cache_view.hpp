// A non-owning view of a paged TurboQuant cache: `num_blocks` blocks of
// layout.block_bytes() bytes each, contiguous (vLLM's kv_cache tensor).
#pragma once

#include <cstdint>

#include "turboquant/format.hpp"

namespace turboquant {

struct CacheView {
  BlockLayout layout;
  std::uint8_t* data = nullptr;
  std::int64_t num_blocks = 0;
  std::int64_t bytes() const { return num_blocks * layout.block_bytes(); }
};

struct ConstCacheView {
  BlockLayout layout;
  const std::uint8_t* data = nullptr;
  std::int64_t num_blocks = 0;
  ConstCacheView() = default;
  ConstCacheView(const BlockLayout& l, const std::uint8_t* d, std::int64_t n) : layout(l), data(d), num_blocks(n) {}
  ConstCacheView(const CacheView& v) : layout(v.layout), data(v.data), num_blocks(v.num_blocks) {}  // NOLINT
  std::int64_t bytes() const { return num_blocks * layout.block_bytes(); }
};

}  // namespace turboquant
