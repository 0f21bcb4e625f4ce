// Host-side unit test of the fast loader's tile cursor (fast_loader.cuh): the
// page, slot and block id of a warp's every tile, advanced in constant time,
// equal the direct division of the tile's first token. Runs without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fast_loader.cuh"

namespace turboquant::cuda::detail {
namespace {

TEST(FastTileCursor, EveryTileMatchesTheDirectPageAndSlot) {
  int checked = 0;
  for (int block_size : {16, 32, 48, 64, 128, 256}) {
    for (int warps : {4, 8, 12}) {
      const int step = warps * 16;  // a warp's tiles are kWarps tiles apart
      for (int first_token : {0, 16, 48, 112, 176, 1008}) {
        const int my_tiles = 40;
        const int last_token = first_token + (my_tiles - 1) * step;
        std::vector<std::int32_t> table(last_token / block_size + 1);
        for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(7919 * i % 1009);
        FastTileCursor cursor(table.data(), block_size, first_token, step, my_tiles);
        for (int i = 0; i < my_tiles; ++i) {
          const int token = first_token + i * step;
          ASSERT_EQ(cursor.page, token / block_size) << "block " << block_size << " warps " << warps << " tile " << i;
          ASSERT_EQ(cursor.slot, token % block_size) << "block " << block_size << " warps " << warps << " tile " << i;
          ASSERT_EQ(cursor.block, table[token / block_size]) << "block " << block_size << " tile " << i;
          ASSERT_EQ(cursor.issued, i);
          cursor.advance();
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 3 * 6 * 40);
}

// A warp with no tile reads nothing from the block table (it may be empty).
TEST(FastTileCursor, NoTilesReadNoTableEntry) {
  const FastTileCursor cursor(nullptr, 16, 4096, 128, 0);
  EXPECT_EQ(cursor.block, 0);
}

}  // namespace
}  // namespace turboquant::cuda::detail
