// Probe of the Tensor Memory Accelerator's box start (PERFORMANCE.md round 12):
// one box of a 4bit_nc AoS cache (D 128, 8 KV heads) at several byte
// coordinates x of a position; prints the wrong bytes per box, or the error
// that stops it. On the H200 (2026-12-02) an earlier version of this probe
// (a k8v4 cache, D 64, 80-byte boxes, the session's first encoder) gave: x = 0
// and 16 land the right bytes, x = 100 stops the kernel with "illegal
// instruction" (so boxes start at 16-byte units, tensor_box.hpp). This version,
// adapted to the final encoder, was compiled but not run (no device time was
// left). Not part of the build; on the GPU machine, from the root:
//   nvcc -std=c++20 -arch=sm_90 -Igpu/src -Icore/include -Iinclude \
//     bench/gpu/probe_tensor_copy.cu gpu/src/tensor_maps.cpp -o /tmp/probe && /tmp/probe
#include <cstdio>
#include <vector>
#include "tensor_box.hpp"
#include "tensor_maps.hpp"
#include "tensor_copy.cuh"
using namespace turboquant;
using namespace turboquant::cuda::detail;

__global__ void probe(const __grid_constant__ CUtensorMap map, int x, int y, int z, int box_bytes, unsigned char* out) {
  __shared__ alignas(128) unsigned char buf[256 * 16];
  __shared__ std::uint64_t bar;
  if (threadIdx.x == 0) {
    barrier_init(&bar, 1);
    barrier_init_fence();
  }
  __syncwarp();
  if (threadIdx.x == 0) {
    barrier_arrive_expect_bytes(&bar, box_bytes * 16);
    tensor_copy_3d(buf, &map, x, y, z, &bar);
  }
  barrier_wait(&bar, 0);
  for (int i = threadIdx.x; i < box_bytes * 16; i += 32) out[i] = buf[i];
}

int main() {
  const core::BlockLayout l{core::preset_format(core::Preset::k4BitNc, 128, core::LayoutKind::kAoS), 16, 8};
  const int nb = 4;
  const long bytes = l.block_bytes() * nb;
  std::vector<unsigned char> h(bytes);
  for (long i = 0; i < bytes; ++i) h[i] = (unsigned char)(i * 7 + i / 251);
  unsigned char *d, *o;
  cudaMalloc(&d, bytes); cudaMalloc(&o, 4096);
  cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice);
  FastTensorMaps maps;
  const bool ok = encode_tensor_maps(l, d, nb, &maps);
  const int box = stage_row_bytes(l.format);
  std::printf("encode %d box %d stride %ld block %ld\n", ok, box, (long)l.token_stride(), (long)l.block_bytes());
  for (int x : {0, 16, 100, 64, 2, 700}) {
    for (int z : {0, 2}) {
      cudaMemset(o, 0, 4096);
      probe<<<1, 32>>>(maps.tiles, x, 0, z, box, o);
      cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) { std::printf("x %d z %d: %s\n", x, z, cudaGetErrorString(e)); return 1; }
      std::vector<unsigned char> got(box * 16);
      cudaMemcpy(got.data(), o, box * 16, cudaMemcpyDeviceToHost);
      int bad = 0;
      for (int r = 0; r < 16; ++r)
        for (int b = 0; b < box; ++b) {
          const long col = x + b;
          const unsigned char want = col < l.token_stride() ? h[z * l.block_bytes() + r * l.token_stride() + col] : 0;
          bad += got[r * box + b] != want;
        }
      std::printf("x %d z %d: %d bad bytes\n", x, z, bad);
    }
  }
}
