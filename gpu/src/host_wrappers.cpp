// Synchronous conveniences: host pointers in and out (tools, tests), and the
// device-argument validators that copy the trusted buffers back.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "cuda_check.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/cuda/device_buffer.hpp"
#include "turboquant/detail/validate.hpp"

namespace turboquant::cuda {
namespace {

using detail::DeviceBuffer;

// Replaces each buffer by a host copy of its device bytes, kept in `store`
// (synchronous; an empty buffer stays empty).
Status download(std::initializer_list<ConstBuffer*> buffers, std::vector<std::vector<std::uint8_t>>* store,
                cudaStream_t stream) {
  store->assign(buffers.size(), {});
  std::size_t i = 0;
  for (ConstBuffer* b : buffers) {
    std::vector<std::uint8_t>& copy = (*store)[i++];
    if (b->data != nullptr && b->bytes != 0) {
      copy.assign(b->bytes, 0);
      TQ_CUDA_TRY(cudaMemcpyAsync(copy.data(), b->data, b->bytes, cudaMemcpyDeviceToHost, stream));
    }
    *b = {copy.empty() ? nullptr : copy.data(), copy.size()};
  }
  TQ_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status();
}

// Copies from `src` to `dst` (two caches of layout l) exactly the bytes an
// encode of these slots writes: each stored slot's record and metadata fields
// of every KV head (AoS: the record holds the fields, copied again here).
void copy_written_slots(const BlockLayout& l, const std::int64_t* slots, std::int64_t num_tokens,
                        const std::uint8_t* src, std::uint8_t* dst) {
  for (std::int64_t i = 0; i < num_tokens; ++i) {
    if (slots[i] < 0) continue;
    const std::int64_t base = l.block_base(slots[i] / l.block_size);
    const int t = static_cast<int>(slots[i] % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      const std::int64_t record = base + l.key_data_offset(t, h);
      std::memcpy(dst + record, src + record, static_cast<std::size_t>(l.format.record_bytes()));
      for (int f = 0; f < l.format.meta_fields(); ++f) {
        const std::int64_t meta = base + l.meta_base(h, f) + l.meta_token_stride() * t;
        std::memcpy(dst + meta, src + meta, 2);
      }
    }
  }
}

}  // namespace

Status decode_from_host(const ConstCacheView& cache, const DecodeArgs& a, CudaMode mode) {
  if (Status s = device_status(); !s.ok()) return s;
  if (Status s = validate_decode(cache, a); !s.ok()) return s;
  if (Status s = decode_can_implement(cache, a, mode); !s.ok()) return s;  // before any upload
  cudaStream_t stream = nullptr;
  DeviceBuffer d_cache, d_query, d_table, d_lens, d_out, d_lse, d_rot, d_work, d_qsl, d_sinks;
  if (Status s = d_cache.upload(cache.data, static_cast<std::size_t>(cache.bytes()), stream); !s.ok()) return s;
  if (Status s = d_query.upload(a.query.data, a.query.bytes, stream); !s.ok()) return s;
  if (Status s = d_table.upload(a.block_table.data, a.block_table.bytes, stream); !s.ok()) return s;
  if (Status s = d_lens.upload(a.seq_lens.data, a.seq_lens.bytes, stream); !s.ok()) return s;
  if (Status s = d_out.allocate(a.out.bytes); !s.ok()) return s;
  if (Status s = d_lse.allocate(a.lse.bytes); !s.ok()) return s;
  if (Status s = d_rot.upload(a.rotation.data, a.rotation.bytes, stream); !s.ok()) return s;
  if (Status s = d_qsl.upload(a.query_start_loc.data, a.query_start_loc.bytes, stream); !s.ok()) return s;
  if (Status s = d_sinks.upload(a.sinks.data, a.sinks.bytes, stream); !s.ok()) return s;
  const int dims = cache.layout.format.head_dim;
  const int rows = static_cast<int>(decode_query_rows(a));  // the workspace holds partials per query row
  if (Status s = d_work.allocate(decode_workspace_bytes(rows, a.num_q_heads, a.num_splits, dims)); !s.ok()) return s;
  ConstCacheView dc(cache.layout, static_cast<const std::uint8_t*>(d_cache.get()), cache.num_blocks);
  DecodeArgs da = a;
  da.query = {d_query.get(), a.query.bytes};
  da.block_table = {d_table.get(), a.block_table.bytes};
  da.seq_lens = {d_lens.get(), a.seq_lens.bytes};
  da.out = {d_out.get(), a.out.bytes};
  da.lse = {d_lse.get(), a.lse.bytes};
  da.rotation = {d_rot.get(), a.rotation.bytes};
  da.query_start_loc = {d_qsl.get(), a.query_start_loc.bytes};
  da.sinks = {d_sinks.get(), a.sinks.bytes};
  if (Status s = decode(dc, da, mode, {d_work.get(), d_work.bytes()}, stream); !s.ok()) return s;
  if (a.out.bytes != 0) TQ_CUDA_TRY(cudaMemcpyAsync(a.out.data, d_out.get(), a.out.bytes, cudaMemcpyDeviceToHost, stream));
  if (a.lse.bytes != 0) TQ_CUDA_TRY(cudaMemcpyAsync(a.lse.data, d_lse.get(), a.lse.bytes, cudaMemcpyDeviceToHost, stream));
  TQ_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status();
}

Status encode_from_host(const CacheView& cache, const EncodeArgs& a) {
  if (Status s = device_status(); !s.ok()) return s;
  if (Status s = validate_encode(cache, a); !s.ok()) return s;
  cudaStream_t stream = nullptr;
  DeviceBuffer d_cache, d_keys, d_values, d_slots, d_rot;
  const auto bytes = static_cast<std::size_t>(cache.bytes());
  // The encode reads no cache byte and writes only its slots' bytes: the
  // device copy starts zeroed (not uploaded) and only the written bytes come
  // back, so that concurrent calls into disjoint slots of one host cache
  // compose as with the CPU backends.
  if (Status s = d_cache.allocate(bytes); !s.ok()) return s;
  TQ_CUDA_TRY(cudaMemsetAsync(d_cache.get(), 0, bytes, stream));
  if (Status s = d_keys.upload(a.keys.data, a.keys.bytes, stream); !s.ok()) return s;
  if (Status s = d_values.upload(a.values.data, a.values.bytes, stream); !s.ok()) return s;
  if (Status s = d_slots.upload(a.slot_mapping.data, a.slot_mapping.bytes, stream); !s.ok()) return s;
  if (Status s = d_rot.upload(a.rotation.data, a.rotation.bytes, stream); !s.ok()) return s;
  CacheView dc{cache.layout, static_cast<std::uint8_t*>(d_cache.get()), cache.num_blocks};
  EncodeArgs da = a;
  da.keys = {d_keys.get(), a.keys.bytes};
  da.values = {d_values.get(), a.values.bytes};
  da.slot_mapping = {d_slots.get(), a.slot_mapping.bytes};
  da.rotation = {d_rot.get(), a.rotation.bytes};
  if (Status s = encode(dc, da, stream); !s.ok()) return s;
  std::vector<std::uint8_t> encoded(bytes);
  TQ_CUDA_TRY(cudaMemcpyAsync(encoded.data(), d_cache.get(), bytes, cudaMemcpyDeviceToHost, stream));
  TQ_CUDA_TRY(cudaStreamSynchronize(stream));
  copy_written_slots(cache.layout, static_cast<const std::int64_t*>(a.slot_mapping.data), a.num_tokens,
                     encoded.data(), cache.data);
  return Status();
}

Status validate_decode_device(const ConstCacheView& cache, const DecodeArgs& a, void* stream) {
  if (Status s = decode_can_implement(cache, a, CudaMode::kStrict); !s.ok()) return s;
  DecodeArgs h = a;
  std::vector<std::vector<std::uint8_t>> copies;
  if (Status s = download({&h.query, &h.block_table, &h.seq_lens, &h.rotation, &h.query_start_loc, &h.sinks}, &copies,
                          static_cast<cudaStream_t>(stream));
      !s.ok())
    return s;
  return turboquant::detail::check_decode_tables(cache, h);  // reads no cache, out or lse byte
}

Status validate_encode_device(const ConstCacheView& cache, const EncodeArgs& a, void* stream) {
  if (Status s = encode_can_implement(cache, a); !s.ok()) return s;
  EncodeArgs h = a;
  std::vector<std::vector<std::uint8_t>> copies;
  if (Status s = download({&h.keys, &h.values, &h.slot_mapping, &h.rotation}, &copies, static_cast<cudaStream_t>(stream));
      !s.ok())
    return s;
  return turboquant::detail::check_encode_tables(cache, h);
}

}  // namespace turboquant::cuda
