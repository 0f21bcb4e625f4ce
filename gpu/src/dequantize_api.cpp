// Dequantize entry points: host-side checks, the launch, and the synchronous
// host-pointer wrappers.
#include <cstdint>
#include <string>

#include "arg_checks.hpp"
#include "cuda_check.hpp"
#include "dequantize_params.hpp"
#include "dispatch.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/cuda/device_buffer.hpp"
#include "turboquant/detail/validate.hpp"
#include "turboquant/detail/validate_dequantize.hpp"

namespace turboquant::cuda {
namespace {

using detail::DeviceBuffer;

detail::DequantizeParams params(const ConstCacheView& cache, const Codebook* user_codebook, ConstBuffer rotation,
                                MutableBuffer keys, MutableBuffer values, DType out_dtype, Basis basis) {
  const Codebook* cb = nullptr;
  detail::DequantizeParams p;
  if (!cache.layout.format.fp8_keys()) {
    (void)turboquant::detail::resolve_codebook(cache.layout.format, user_codebook, &cb);  // checked by the caller
    p.codebook = *cb;
  }
  p.layout = cache.layout;
  p.cache = cache.data;
  p.num_blocks = cache.num_blocks;
  p.keys = keys.data;
  p.values = values.data;
  p.out_dtype = out_dtype;
  p.original = basis == Basis::kOriginal;
  p.rotation = static_cast<const float*>(rotation.data);
  return p;
}

// The kernel reads codes as 16-bit words (dequantize.cuh's code_run); every
// record and field offset is even, so an even cache pointer is enough.
Status check_cache_alignment(const ConstCacheView& cache) {
  const auto address = reinterpret_cast<std::uintptr_t>(cache.data);
  if (address % 2 == 0) return Status();
  return detail::invalid_argument("cache.data = " + std::to_string(address) +
                                  " is odd: the CUDA dequantize needs a 2-byte aligned cache");
}

}  // namespace

Status dequantize_can_implement(const ConstCacheView& cache, const DequantizeArgs& a) {
  if (Status s = turboquant::detail::check_dequantize_shapes(cache, a); !s.ok()) return s;
  if (Status s = check_cache_alignment(cache); !s.ok()) return s;
  return detail::check_head_dim(cache.layout.format.head_dim, "dequantize");
}

Status dequantize_sequences_can_implement(const ConstCacheView& cache, const DequantizeSequencesArgs& a) {
  if (Status s = turboquant::detail::check_dequantize_sequences_shapes(cache, a); !s.ok()) return s;
  if (Status s = check_cache_alignment(cache); !s.ok()) return s;
  return detail::check_head_dim(cache.layout.format.head_dim, "dequantize");
}

Status dequantize(const ConstCacheView& cache, const DequantizeArgs& a, void* stream) {
  if (Status s = dequantize_can_implement(cache, a); !s.ok()) return s;
  if (a.num_slots == 0) return Status();
  if (Status s = detail::check_device_pointers({{"cache.data", cache.data},
                                                {"slots", a.slots.data},
                                                {"keys", a.keys.data},
                                                {"values", a.values.data},
                                                {"rotation", a.rotation.data}});
      !s.ok())
    return s;
  detail::DequantizeParams p = params(cache, a.codebook, a.rotation, a.keys, a.values, a.out_dtype, a.basis);
  p.slots = static_cast<const std::int64_t*>(a.slots.data);
  p.num_items = a.num_slots;
  TQ_CUDA_TRY(detail::launch_dequantize(p, static_cast<cudaStream_t>(stream)));
  return Status();
}

Status dequantize_sequences(const ConstCacheView& cache, const DequantizeSequencesArgs& a, void* stream) {
  if (Status s = dequantize_sequences_can_implement(cache, a); !s.ok()) return s;
  if (std::int64_t{a.batch} * a.max_seq == 0) return Status();
  if (Status s = detail::check_device_pointers({{"cache.data", cache.data},
                                                {"block_table", a.block_table.data},
                                                {"seq_lens", a.seq_lens.data},
                                                {"keys", a.keys.data},
                                                {"values", a.values.data},
                                                {"rotation", a.rotation.data}});
      !s.ok())
    return s;
  detail::DequantizeParams p = params(cache, a.codebook, a.rotation, a.keys, a.values, a.out_dtype, a.basis);
  p.block_table = static_cast<const std::int32_t*>(a.block_table.data);
  p.seq_lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.max_seq = a.max_seq;
  p.num_items = std::int64_t{a.batch} * a.max_seq;
  TQ_CUDA_TRY(detail::launch_dequantize(p, static_cast<cudaStream_t>(stream)));
  return Status();
}

Status dequantize_from_host(const ConstCacheView& cache, const DequantizeArgs& a) {
  if (Status s = device_status(); !s.ok()) return s;
  if (Status s = validate_dequantize(cache, a); !s.ok()) return s;
  if (Status s = dequantize_can_implement(cache, a); !s.ok()) return s;  // before any upload
  if (a.num_slots == 0) return Status();
  cudaStream_t stream = nullptr;
  DeviceBuffer d_cache, d_slots, d_keys, d_values, d_rot;
  if (Status s = d_cache.upload(cache.data, static_cast<std::size_t>(cache.bytes()), stream); !s.ok()) return s;
  if (Status s = d_slots.upload(a.slots.data, static_cast<std::size_t>(a.num_slots) * 8, stream); !s.ok()) return s;
  const std::size_t out_bytes = static_cast<std::size_t>(a.num_slots) * cache.layout.num_kv_heads *
                                cache.layout.format.head_dim * dtype_size(a.out_dtype);
  if (Status s = d_keys.allocate(out_bytes); !s.ok()) return s;
  if (Status s = d_values.allocate(out_bytes); !s.ok()) return s;
  if (Status s = d_rot.upload(a.rotation.data, a.rotation.bytes, stream); !s.ok()) return s;
  DequantizeArgs da = a;
  da.slots = {d_slots.get(), d_slots.bytes()};
  da.keys = {d_keys.get(), out_bytes};
  da.values = {d_values.get(), out_bytes};
  da.rotation = {d_rot.get(), a.rotation.bytes};
  const ConstCacheView dc(cache.layout, static_cast<const std::uint8_t*>(d_cache.get()), cache.num_blocks);
  if (Status s = dequantize(dc, da, stream); !s.ok()) return s;
  TQ_CUDA_TRY(cudaMemcpyAsync(a.keys.data, d_keys.get(), out_bytes, cudaMemcpyDeviceToHost, stream));
  TQ_CUDA_TRY(cudaMemcpyAsync(a.values.data, d_values.get(), out_bytes, cudaMemcpyDeviceToHost, stream));
  TQ_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status();
}

Status dequantize_sequences_from_host(const ConstCacheView& cache, const DequantizeSequencesArgs& a) {
  if (Status s = device_status(); !s.ok()) return s;
  if (Status s = validate_dequantize_sequences(cache, a); !s.ok()) return s;
  if (Status s = dequantize_sequences_can_implement(cache, a); !s.ok()) return s;
  if (std::int64_t{a.batch} * a.max_seq == 0) return Status();
  cudaStream_t stream = nullptr;
  DeviceBuffer d_cache, d_table, d_lens, d_keys, d_values, d_rot;
  if (Status s = d_cache.upload(cache.data, static_cast<std::size_t>(cache.bytes()), stream); !s.ok()) return s;
  const std::size_t table_bytes = static_cast<std::size_t>(a.batch) * a.max_blocks_per_seq * 4;
  if (Status s = d_table.upload(a.block_table.data, table_bytes, stream); !s.ok()) return s;
  if (Status s = d_lens.upload(a.seq_lens.data, static_cast<std::size_t>(a.batch) * 4, stream); !s.ok()) return s;
  const std::size_t out_bytes = static_cast<std::size_t>(a.batch) * cache.layout.num_kv_heads * a.max_seq *
                                cache.layout.format.head_dim * dtype_size(a.out_dtype);
  // Rows past a sequence's length are not written: start from the caller's bytes.
  if (Status s = d_keys.upload(a.keys.data, out_bytes, stream); !s.ok()) return s;
  if (Status s = d_values.upload(a.values.data, out_bytes, stream); !s.ok()) return s;
  if (Status s = d_rot.upload(a.rotation.data, a.rotation.bytes, stream); !s.ok()) return s;
  DequantizeSequencesArgs da = a;
  da.block_table = {d_table.get(), table_bytes};
  da.seq_lens = {d_lens.get(), d_lens.bytes()};
  da.keys = {d_keys.get(), out_bytes};
  da.values = {d_values.get(), out_bytes};
  da.rotation = {d_rot.get(), a.rotation.bytes};
  const ConstCacheView dc(cache.layout, static_cast<const std::uint8_t*>(d_cache.get()), cache.num_blocks);
  if (Status s = dequantize_sequences(dc, da, stream); !s.ok()) return s;
  if (Status s = d_keys.download(a.keys.data, stream); !s.ok()) return s;
  return d_values.download(a.values.data, stream);
}

}  // namespace turboquant::cuda
