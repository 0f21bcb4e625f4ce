// tq's timing of the CUDA registry backends (built only with turboquant::cuda):
// plain calls go through the registry (host buffers, copied); tq bench keeps
// the inputs in device memory and times the kernels alone with CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <regex>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/cuda.hpp"
#include "turboquant/cuda/device_buffer.hpp"

namespace tq {
namespace {

namespace tqc = turboquant::cuda;
using turboquant::CacheView;
using turboquant::ConstCacheView;
using turboquant::DecodeArgs;
using turboquant::EncodeArgs;

using turboquant::cuda::detail::DeviceBuffer;

Status cuda_status(cudaError_t e, const char* what) {
  return e == cudaSuccess ? Status() : turboquant::cuda::detail::device_error(e, what);
}

// Milliseconds of `fn` on the default stream, between two events.
Status time_on_device(const std::function<Status()>& fn, double* ms) {
  cudaEvent_t start, stop;
  if (Status s = cuda_status(cudaEventCreate(&start), "cudaEventCreate"); !s.ok()) return s;
  if (Status s = cuda_status(cudaEventCreate(&stop), "cudaEventCreate"); !s.ok()) return s;
  cudaEventRecord(start, nullptr);
  Status s = fn();
  cudaEventRecord(stop, nullptr);
  if (s.ok()) s = cuda_status(cudaEventSynchronize(stop), "kernel");
  float elapsed = 0;
  cudaEventElapsedTime(&elapsed, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *ms = elapsed;
  return s;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const turboquant::Backend& backend, std::string isa)
      : Backend(backend, 0),
        mode_(backend.name() == "cuda:fast" ? tqc::CudaMode::kFast : tqc::CudaMode::kStrict),
        isa_(std::move(isa)) {}
  std::string isa() const override { return isa_; }

  Status timed_decode(const ConstCacheView& cache, const DecodeArgs& args, const TimingPlan& plan,
                      std::vector<double>* ms) override {
    if (Status s = turboquant::validate_decode(cache, args); !s.ok()) return s;
    const std::size_t work_bytes =
        tqc::decode_workspace_bytes(args.batch, args.num_q_heads, args.num_splits, cache.layout.format.head_dim);
    DeviceBuffer dcache, query, table, lens, out, lse, rotation, workspace;
    for (Status s : {dcache.upload(cache.data, static_cast<std::size_t>(cache.bytes())),
                     query.upload(args.query.data, args.query.bytes),
                     table.upload(args.block_table.data, args.block_table.bytes),
                     lens.upload(args.seq_lens.data, args.seq_lens.bytes), out.allocate(args.out.bytes),
                     lse.allocate(args.lse.bytes), rotation.upload(args.rotation.data, args.rotation.bytes),
                     workspace.allocate(work_bytes)}) {
      if (!s.ok()) return s;
    }
    const ConstCacheView dview(cache.layout, static_cast<const std::uint8_t*>(dcache.get()), cache.num_blocks);
    DecodeArgs d = args;
    d.query.data = query.get();
    d.block_table.data = table.get();
    d.seq_lens.data = lens.get();
    d.out.data = out.get();
    if (args.lse.data != nullptr) d.lse.data = lse.get();
    if (args.rotation.data != nullptr) d.rotation.data = rotation.get();
    const turboquant::MutableBuffer ws{workspace.get(), work_bytes};
    const auto run = [&] { return tqc::decode(dview, d, mode_, ws, nullptr); };
    double warm = 0;
    if (Status s = time_on_device(run, &warm); !s.ok()) return s;
    ms->clear();
    double total = 0;
    while (true) {
      double t = 0;
      if (Status s = time_on_device(run, &t); !s.ok()) return s;
      ms->push_back(t);
      total += t;
      const int n = static_cast<int>(ms->size());
      // Kernels are short: take more runs, up to the plan's time.
      if (n >= std::max(plan.max_runs, 50) || (n >= plan.min_runs && total >= plan.min_seconds * 1e3)) break;
    }
    if (Status s = out.download(args.out.data); !s.ok()) return s;
    return lse.download(args.lse.data);
  }

  Status timed_encode(const CacheView& cache, const EncodeArgs& args, double* ms) override {
    if (Status s = turboquant::validate_encode(cache, args); !s.ok()) return s;
    const auto cache_bytes = static_cast<std::size_t>(cache.bytes());
    DeviceBuffer dcache, keys, values, slots, rotation;
    for (Status s : {dcache.upload(cache.data, cache_bytes), keys.upload(args.keys.data, args.keys.bytes),
                     values.upload(args.values.data, args.values.bytes),
                     slots.upload(args.slot_mapping.data, args.slot_mapping.bytes),
                     rotation.upload(args.rotation.data, args.rotation.bytes)}) {
      if (!s.ok()) return s;
    }
    const CacheView dview{cache.layout, static_cast<std::uint8_t*>(dcache.get()), cache.num_blocks};
    EncodeArgs e = args;
    e.keys.data = keys.get();
    e.values.data = values.get();
    e.slot_mapping.data = slots.get();
    if (args.rotation.data != nullptr) e.rotation.data = rotation.get();
    const auto run = [&] { return tqc::encode(dview, e, nullptr); };
    double warm = 0;  // the same bytes again: encoding is idempotent
    if (Status s = time_on_device(run, &warm); !s.ok()) return s;
    if (Status s = time_on_device(run, ms); !s.ok()) return s;
    return dcache.download(cache.data);
  }

  // Device-to-device copy of 1 GiB, counting bytes read plus bytes written.
  double probe_gbps() override {
    constexpr std::size_t kBytes = std::size_t{1} << 30;
    DeviceBuffer a, b;
    if (!a.allocate(kBytes).ok() || !b.allocate(kBytes).ok()) return 0;
    double best = 0;
    for (int i = 0; i < 5; ++i) {
      double ms = 0;
      const Status s = time_on_device(
          [&] {
            return cuda_status(cudaMemcpyAsync(b.get(), a.get(), kBytes, cudaMemcpyDeviceToDevice, nullptr), "copy");
          },
          &ms);
      if (s.ok() && ms > 0 && i > 0) best = std::max(best, 2.0 * kBytes / (ms * 1e-3) / 1e9);
    }
    return best;
  }
  std::string probe_name() const override { return "device copy (read + write), " + tqc::device_description(); }

 private:
  tqc::CudaMode mode_;
  std::string isa_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const turboquant::Backend& backend) {
  std::smatch m;
  const std::string description = tqc::device_description();
  const std::string isa = std::regex_search(description, m, std::regex("sm_[0-9]+")) ? m.str() : "cuda";
  return std::make_unique<CudaBackend>(backend, isa);
}

}  // namespace tq
