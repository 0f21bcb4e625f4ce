// Launch of the fast-decode instances of one head_dim (included by the
// generated fast_kernels_d<D>.cu), dispatched over the layout, FastBits and,
// for FP8 keys, the FP8 flavour.
#pragma once

#include <string>
#include <type_traits>

#include "cuda_check.hpp"
#include "device_cache.hpp"
#include "fast_decode.cuh"
#include "wide_decode.cuh"
#include "wide_specialized.cuh"
#include "launch.hpp"

namespace turboquant::cuda::detail {

// kKvHeads: the KV heads of a block (more than one: fused heads, fast_decode.cuh).
template <class T, bool kRows, int kKvHeads = 1>
cudaError_t launch_fast_instance(const DecodeParams& p, const FastTensorMaps& maps, cudaStream_t stream) {
  static PerDeviceInt attr_cache;
  const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, fast_decode_kernel<T, kRows, kKvHeads>, T::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const auto row_blocks = fast_row_blocks(p.query_start_loc != nullptr, p.rows, p.batch, p.fast_rows_per_block);
  const int head_blocks = p.layout.num_kv_heads / kKvHeads;
  const dim3 grid(p.plan_splits, head_blocks * p.chunks_per_kv_head, static_cast<unsigned>(row_blocks));
  if (kKvHeads > 1 || p.pace_cluster <= 1) {
    fast_decode_kernel<T, kRows, kKvHeads><<<grid, T::kThreads, T::kSmemBytes, stream>>>(maps, p);
    return cudaGetLastError();
  }
  // The blocks of one split and row block along grid y (the plan's cluster
  // divides its extent): cluster_pace.cuh.
  const ClusterLaunch launch(grid, T::kThreads, T::kSmemBytes, stream, p.pace_cluster);
  return cudaLaunchKernelEx(&launch.config, fast_decode_kernel<T, kRows>, maps, p);
}

// Clusters of `cluster` blocks of the instance the device holds at once (0 on
// error or where clusters are not supported), cached per device and size.
template <class T, bool kRows>
int fast_resident_clusters(int cluster) {
  static PerDeviceInt attr_cache;
  static PerDeviceInt clusters_cache[kPaceMaxCluster + 1];
  if (cluster < 1 || cluster > kPaceMaxCluster) return 0;
  return clusters_cache[cluster].get([&] {
    if (set_max_dynamic_smem_once(attr_cache, fast_decode_kernel<T, kRows>, T::kSmemBytes) != cudaSuccess) return 0;
    const ClusterLaunch launch(dim3(1, static_cast<unsigned>(cluster), 1), T::kThreads, T::kSmemBytes, nullptr, cluster);
    int n = 0;
    return cudaOccupancyMaxActiveClusters(&n, fast_decode_kernel<T, kRows>, &launch.config) == cudaSuccess ? n : 0;
  });
}

// The wide kernel of T's format: grid (splits, Hk, row blocks); p.fast_warps
// kWideSpecializedWarps takes the one of warpgroups in roles
// (wide_specialized.cuh), else wide_decode.cuh's.
template <class T>
cudaError_t launch_wide(const DecodeParams& p, const FastTensorMaps& maps, cudaStream_t stream) {
  using W = WithWarps<T, kWideWarps>;
  const auto row_blocks = fast_row_blocks(true, p.rows, p.batch, p.fast_rows_per_block);
  const dim3 grid(p.plan_splits, p.layout.num_kv_heads, static_cast<unsigned>(row_blocks));
  auto launch = [&](auto kernel, int warps, int smem_bytes, PerDeviceInt& attr_cache) {
    const cudaError_t attr = set_max_dynamic_smem_once(attr_cache, kernel, smem_bytes);
    if (attr != cudaSuccess) return attr;
    kernel<<<grid, 32 * warps, smem_bytes, stream>>>(maps, p);
    return cudaGetLastError();
  };
  static PerDeviceInt attr_cache, specialized_attr_cache;
  if (p.fast_warps == kWideSpecializedWarps) {
    using P = WideProducerTraits<T>;
    return launch(wide_specialized_decode_kernel<P>, kWideSpecializedWarps, WideSpecializedSmem<P>::kLaunchBytes,
                  specialized_attr_cache);
  }
  return launch(wide_decode_kernel<W>, kWideWarps, WideSmem<W>::kLaunchBytes, attr_cache);
}

// Resident blocks per SM of the wide kernel of `warps` (launch_wide's rule).
template <class T>
int wide_occupancy(int warps) {
  using W = WithWarps<T, kWideWarps>;
  if (warps == kWideSpecializedWarps) {
    using P = WideProducerTraits<T>;
    static PerDeviceInt attr_cache, blocks_cache;
    return cached_occupancy(attr_cache, blocks_cache, wide_specialized_decode_kernel<P>, 32 * kWideSpecializedWarps,
                            WideSpecializedSmem<P>::kLaunchBytes);
  }
  static PerDeviceInt attr_cache, blocks_cache;
  return cached_occupancy(attr_cache, blocks_cache, wide_decode_kernel<W>, 32 * kWideWarps,
                          WideSmem<W>::kLaunchBytes);
}

// f(traits) of the two-column-tile instance of T's format for `warps` per
// block (DecodeParams::fast_warps: kFastDeepWarps, or 0: the format's).
template <class T, class F>
decltype(auto) with_two_tile_instance(int warps, F&& f) {
  return warps == kFastDeepWarps ? f(WithColumnTiles<T, 2, kFastDeepWarps>{}) : f(WithColumnTiles<T, 2>{});
}

// f(std::integral_constant<int, kv heads a block>) for p's blocks: 1, or
// T::kFusedKvHeads for fused heads (a plan asks for them only where
// fast_fusable_heads, which T::kFusableHeads mirrors).
template <class T, class F>
cudaError_t with_kv_heads(const DecodeParams& p, F&& f) {
  if (p.fast_kv_heads_per_block == 1) return f(std::integral_constant<int, 1>{});
  if constexpr (T::kFusableHeads) {
    if (p.fast_kv_heads_per_block == T::kFusedKvHeads) return f(std::integral_constant<int, T::kFusedKvHeads>{});
  }
  return cudaErrorInvalidValue;
}

// Whether T has the instances of fewer column tiles than the wide kernel's:
// tensor-copy traits have them only for the formats those kernels copy by
// boxes (tensor_copy_format); the wide kernel takes boxes for every boxable
// format (decode_plan.cpp).
template <class T>
inline constexpr bool kFastNarrowInstances = !T::kTensorCopy || T::kTensorCopyFits;

// Multi-token rows and windows take the kRows instance (sinks only change the
// merge), with p.fast_column_tiles column tiles (fast_plan.hpp); eight take
// the wide kernel.
template <class T>
cudaError_t launch_fast(const DecodeParams& p, const FastTensorMaps& maps, cudaStream_t stream) {
  if constexpr (fast_has_two_column_tiles(T::kDim)) {
    if (p.fast_column_tiles == kFastWideColumnTiles) return launch_wide<T>(p, maps, stream);
  }
  if constexpr (!kFastNarrowInstances<T>) {
    return cudaErrorInvalidValue;  // a plan never asks for one (tensor_copy_fits)
  } else {
    if constexpr (fast_has_two_column_tiles(T::kDim)) {
      if (p.fast_column_tiles == 2) {
        return with_two_tile_instance<T>(p.fast_warps, [&](auto two) {
          return with_kv_heads<decltype(two)>(p, [&](auto heads) {
            return launch_fast_instance<decltype(two), true, decltype(heads)::value>(p, maps, stream);
          });
        });
      }
    }
    const bool rows = fast_rows_kernel(p.query_start_loc != nullptr, p.sliding_window);
    return with_kv_heads<T>(p, [&](auto heads) {
      constexpr int H = decltype(heads)::value;
      return rows ? launch_fast_instance<T, true, H>(p, maps, stream)
                  : launch_fast_instance<T, false, H>(p, maps, stream);
    });
  }
}

// Resident blocks per SM of one instance on the current device (cached per
// device; 0 on error). The kRows instance has the launch bounds and shared
// memory of the single-token one (kRows = false) of the same column tiles.
template <class T>
int fast_occupancy() {
  static PerDeviceInt attr_cache, blocks_cache;
  constexpr bool kRows = T::kColumnTiles > 1;  // the only instance with more column tiles
  return cached_occupancy(attr_cache, blocks_cache, fast_decode_kernel<T, kRows>, T::kThreads, T::kSmemBytes);
}

// f(FastTraits<...>{}) for the format's instance (kUnsupported for bits
// without one); with tensor_copy (the plan's tensor_copy_fits, or
// wide_tensor_copy_fits for the wide kernel): the tensor-copy instance, which
// only the generated fast_kernels_tc_d<D>.cu instantiates
// (kTensorCopyInstances there, false elsewhere: the other files stay lean).
template <int D, bool kTensorCopyInstances, class F>
Status dispatch_fast(const core::Format& f, bool tensor_copy, const char* what, F&& fn) {
  return dispatch_layout(f.layout, [&](auto layout) {
    constexpr core::LayoutKind L = decltype(layout)::value;
    return dispatch_bits(FastBits{}, f.key_bits, f.value_bits, what, [&](auto b) {
      constexpr int KB = decltype(b)::kKey;
      constexpr int VB = decltype(b)::kValue;
      auto with_fp8 = [&](auto tc) {
        constexpr bool TC = decltype(tc)::value;
        if constexpr (KB == core::kFp8KeyBits) {
          if (f.fp8_format == core::Fp8Format::kE4b15) return fn(FastTraits<D, KB, VB, L, core::Fp8Format::kE4b15, TC>{});
        }
        return fn(FastTraits<D, KB, VB, L, core::Fp8Format::kE4m3, TC>{});
      };
      if constexpr (kTensorCopyInstances && FastTraits<D, KB, VB, L>::kTensorCopyBoxable) {
        if (tensor_copy) return with_fp8(std::true_type{});
      }
      if constexpr (kTensorCopyInstances) {
        return Status(StatusCode::kInternal, std::string(what) + ": no tensor-copy instance for this format");
      } else {
        return with_fp8(std::false_type{});
      }
    });
  });
}

// The launch of p's instance (launch.hpp); kTensorCopyInstances: the
// instances of p.tensor_copy.
template <int D, bool kTensorCopyInstances>
Status launch_fast_decode_dim(const DecodeParams& p, const FastTensorMaps& maps, cudaStream_t stream) {
  constexpr const char* kWhat = "fast decode launch";
  return dispatch_fast<D, kTensorCopyInstances>(p.layout.format, p.tensor_copy, kWhat, [&](auto traits) {
    const cudaError_t err = launch_fast<decltype(traits)>(p, maps, stream);
    return err == cudaSuccess ? Status() : device_error(err, kWhat);
  });
}

// Resident blocks of the format's instance: per SM (cluster 1), or in
// clusters of `cluster` blocks on the whole device (fast_resident_clusters
// times cluster; one-column-tile instances only, else 0: the single-token
// kernel's, whose launch bounds and shared memory the kRows one shares).
template <int D, bool kTensorCopyInstances>
int fast_decode_occupancy_dim(const core::Format& f, int column_tiles, int warps, int cluster) {
  int blocks = 0;
  (void)dispatch_fast<D, kTensorCopyInstances>(f, kTensorCopyInstances, "fast decode", [&](auto traits) {
    using T = decltype(traits);
    if (cluster > 1 && column_tiles != 1) return Status();  // never paced (pace_cluster_for): 0
    if constexpr (fast_has_two_column_tiles(D)) {
      if (column_tiles == kFastWideColumnTiles) {
        blocks = wide_occupancy<T>(warps);
        return Status();
      }
    }
    if constexpr (kFastNarrowInstances<T>) {
      if constexpr (fast_has_two_column_tiles(D)) {
        if (column_tiles == 2) {
          blocks = with_two_tile_instance<T>(warps, [](auto two) { return fast_occupancy<decltype(two)>(); });
          return Status();
        }
      }
      blocks = cluster > 1 ? cluster * fast_resident_clusters<T, false>(cluster) : fast_occupancy<T>();
    }
    return Status();
  });
  return blocks;
}

}  // namespace turboquant::cuda::detail
