// Device-side unit tests of the warp-level helpers that claim the bits of a
// core function: the encode group's dot16, FWHT and min/max scans
// (group_contract.cuh), the strict kernels' dot16 tree (tree_level and
// TreeSlots) and their staged key decode (StrictKeyLane). Each runs in a tiny
// kernel on random inputs and is compared bit for bit with core on the host.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "group_contract.cuh"
#include "strict_phases.cuh"
#include "turboquant/core/fp8.hpp"
#include "turboquant/core/hadamard.hpp"
#include "turboquant/core/pack.hpp"
#include "turboquant/core/quantize.hpp"
#include "turboquant/core/reduction.hpp"

namespace turboquant::cuda::detail {
namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Device copy of a host vector, freed at scope end.
template <class T>
struct Dev {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit Dev(std::size_t count) : Dev(std::vector<T>(count)) {}
  ~Dev() { cudaFree(ptr); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

std::vector<float> random_floats(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One warp, 32 / kLanes vectors: out[3 * vec] = group_dot16(a, b),
// out[3 * vec + 1 .. 2] = group_min_max(a) and fwht[vec][D] = group_fwht(a).
template <int D>
__global__ void group_kernel(const float* a, const float* b, float* out, float* fwht) {
  using G = RecordGroup<D>;
  const int lane = threadIdx.x;
  const int sub = lane & (G::kLanes - 1);
  const int vec = lane / G::kLanes;
  const unsigned mask = G::mask(lane);
  float x[G::kElems], y[G::kElems];
  for (int e = 0; e < G::kElems; ++e) {
    x[e] = a[vec * D + G::dim(sub, e)];
    y[e] = b[vec * D + G::dim(sub, e)];
  }
  const float dot = group_dot16<D>(x, y, mask);
  const float2 mm = group_min_max<D>(x, sub, mask, lane - sub);
  if (sub == G::kLanes - 1) {  // every lane holds the results; the last one reports
    out[3 * vec] = dot;
    out[3 * vec + 1] = mm.x;
    out[3 * vec + 2] = mm.y;
  }
  group_fwht<D>(x, sub, mask);
  for (int e = 0; e < G::kElems; ++e) fwht[vec * D + G::dim(sub, e)] = x[e];
}

template <int D>
void check_group(std::uint32_t seed) {
  constexpr int kVectors = 32 / RecordGroup<D>::kLanes;
  std::mt19937 rng(seed);
  std::vector<float> a = random_floats(rng, kVectors * D), b = random_floats(rng, kVectors * D);
  a[D] = 0.0f;  // vector 1: zeros of both signs (the scans keep the first)
  a[D + 5] = -0.0f;
  for (int d = 0; d < D; ++d) a[2 * D + d] = d % 3 == 0 ? -0.0f : 0.0f;  // vector 2: all zero
  a[3 * D] = std::numeric_limits<float>::quiet_NaN();                   // vector 3: NaN first
  Dev<float> da(a), db(b), dout(3 * kVectors), dfwht(kVectors * D);
  group_kernel<D><<<1, 32>>>(da.ptr, db.ptr, dout.ptr, dfwht.ptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = dout.get(), fw = dfwht.get();
  for (int v = 0; v < kVectors; ++v) {
    const float* av = &a[v * D];
    const core::ValueRange r = core::value_range(av, D);
    const float dot = core::dot16(av, &b[v * D], D);
    if (dot != dot) {  // NaN input: a NaN (device and host NaN payloads differ)
      EXPECT_NE(out[3 * v], out[3 * v]) << "dot16 D=" << D << " vector " << v;
    } else {
      EXPECT_EQ(bits_of(out[3 * v]), bits_of(dot)) << "dot16 D=" << D << " vector " << v;
    }
    EXPECT_EQ(bits_of(out[3 * v + 1]), bits_of(r.min)) << "min D=" << D << " vector " << v;
    EXPECT_EQ(bits_of(out[3 * v + 2]), bits_of(r.max)) << "max D=" << D << " vector " << v;
    if (v == 3) continue;  // NaN propagates through the butterflies in any order
    std::vector<float> ref(av, av + D);
    core::fwht(ref.data(), D);
    for (int d = 0; d < D; ++d) {
      ASSERT_EQ(bits_of(fw[v * D + d]), bits_of(ref[d])) << "fwht D=" << D << " vector " << v << " dim " << d;
    }
  }
}

TEST(GpuDeviceHelpers, GroupContractMatchesCore) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    std::printf("seed %u\n", seed);
    check_group<64>(seed);
    check_group<128>(seed);
    check_group<256>(seed);
  }
}

// The strict score tree for H heads: lane (j, tg) holds dot16 lane j of
// tokens 2i + tg, head g as s[i * H + g]; after the four levels, the writers
// hold token 2 (v / H) + tg, head v % H at slot v - vbase.
template <int H>
__global__ void tree_kernel(const float* lanes, float* sums) {  // lanes[token][head][16], sums[token][head]
  constexpr int V = 8 * H;
  const int lane = threadIdx.x;
  const int j = lane & 15;
  const int tg = lane >> 4;
  float s[V];
  for (int i = 0; i < 8; ++i) {
    for (int g = 0; g < H; ++g) s[i * H + g] = lanes[((2 * i + tg) * H + g) * 16 + j];
  }
  tree_level<V>(s, lane, 8);
  tree_level<(V >= 4 ? V / 2 : 1)>(s, lane, 4);
  tree_level<(V >= 8 ? V / 4 : 1)>(s, lane, 2);
  tree_level<(V >= 16 ? V / 8 : 1)>(s, lane, 1);
  const TreeSlots<H> slots(lane);
  if (slots.writer) {
    for (int i = 0; i < TreeSlots<H>::kKeep; ++i) {
      const int v = slots.vbase + i;
      sums[(2 * (v / H) + tg) * H + v % H] = s[i];
    }
  }
}

template <int H>
void check_tree(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> lanes = random_floats(rng, 16 * H * 16);
  Dev<float> dl(lanes), ds(std::vector<float>(16 * H, -1.0f));
  tree_kernel<H><<<1, 32>>>(dl.ptr, ds.ptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> sums = ds.get();
  for (int t = 0; t < 16; ++t) {
    for (int g = 0; g < H; ++g) {
      float l16[16];
      std::memcpy(l16, &lanes[(t * H + g) * 16], sizeof(l16));
      EXPECT_EQ(bits_of(sums[t * H + g]), bits_of(core::reduce_lanes16(l16)))
          << "H=" << H << " token " << t << " head " << g;
    }
  }
}

TEST(GpuDeviceHelpers, StrictTreeMatchesReduceLanes16) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (std::uint32_t seed : {4u, 5u}) {
    std::printf("seed %u\n", seed);
    check_tree<1>(seed);
    check_tree<2>(seed);
    check_tree<4>(seed);
  }
}

// StrictKeyLane on a staged row (the key bytes first, one word of slack), and
// on shifted rows (AoS: the key bytes from row byte kShiftBytes, an even number
// up to 14 as row_shift_bits gives): dot16 lane j reads dims j, j + 16, ...
template <int KB, int D, core::Fp8Format F8, int kShiftBytes>
__global__ void key_kernel(const std::uint32_t* row, const float* codebook, float* out) {
  __shared__ float centroids[core::kMaxCodebookSize];
  if (threadIdx.x < core::kMaxCodebookSize) centroids[threadIdx.x] = codebook[threadIdx.x];
  __syncthreads();
  const int j = threadIdx.x & 15;
  const StrictKeyLane<KB, F8> keys(row, j, 8 * kShiftBytes);
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    if (threadIdx.x < 16) out[j + 16 * k] = keys.key(k, centroids);
  }
}

template <int KB, int D, core::Fp8Format F8 = core::Fp8Format::kE4m3, int kShiftBytes = 0>
void check_key(std::uint32_t seed) {
  core::Format f = core::make_format(D, KB, 4);
  f.fp8_format = F8;
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(f.key_data_bytes() + 8);
  for (auto& x : bytes) x = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> staged((bytes.size() + kShiftBytes + 4 + 3) / 4 * 4, 0xee);
  std::memcpy(staged.data() + kShiftBytes, bytes.data(), bytes.size());
  std::vector<std::uint32_t> row(staged.size() / 4);
  std::memcpy(row.data(), staged.data(), row.size() * 4);
  std::vector<float> cb = random_floats(rng, core::kMaxCodebookSize);
  Dev<std::uint32_t> drow(row);
  Dev<float> dcb(cb), dout(D);
  key_kernel<KB, D, F8, kShiftBytes><<<1, 32>>>(drow.ptr, dcb.ptr, dout.ptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = dout.get();
  for (int d = 0; d < D; ++d) {
    const float ref = f.fp8_keys() ? core::fp8_to_float(F8, bytes[d]) : cb[core::unpack_code(KB, bytes.data(), d)];
    if (ref != ref) {  // e4m3 NaN: any NaN (it only feeds fma_rn)
      EXPECT_NE(out[d], out[d]) << "KB=" << KB << " dim " << d;
    } else {
      EXPECT_EQ(bits_of(out[d]), bits_of(ref)) << "KB=" << KB << " D=" << D << " shift " << kShiftBytes << " dim " << d;
    }
  }
}

TEST(GpuDeviceHelpers, StrictKeyMatchesCoreDecode) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr auto kE4b15 = core::Fp8Format::kE4b15;
  constexpr auto kE4m3 = core::Fp8Format::kE4m3;
  for (std::uint32_t seed : {6u, 7u}) {
    std::printf("seed %u\n", seed);
    check_key<3, 128>(seed);
    check_key<4, 128>(seed);
    check_key<8, 128>(seed);
    check_key<3, 256>(seed);
    check_key<4, 64>(seed);
    check_key<8, 64>(seed);
    check_key<8, 128, kE4b15>(seed);
    check_key<3, 128, kE4m3, 2>(seed);
    check_key<3, 128, kE4m3, 6>(seed);
    check_key<3, 64, kE4m3, 14>(seed);
    check_key<4, 128, kE4m3, 2>(seed);
    check_key<4, 128, kE4m3, 12>(seed);
    check_key<4, 256, kE4m3, 14>(seed);
    check_key<8, 64, kE4b15, 2>(seed);
    check_key<8, 128, kE4m3, 10>(seed);
  }
}

}  // namespace
}  // namespace turboquant::cuda::detail
