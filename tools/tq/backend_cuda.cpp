// tq's CUDA backends (built only with turboquant::cuda): "cuda" runs the fast
// tensor-core decode, "cuda-strict" the kernels bit-exact with the golden
// model. Plain calls use the *_from_host wrappers; tq bench keeps the inputs
// in device memory and times the kernels alone with CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <regex>

#include "backend.hpp"
#include "common.hpp"
#include "turboquant/cuda.hpp"

namespace tq {
namespace {

namespace tqc = turboquant::cuda;
using turboquant::CacheView;
using turboquant::ConstCacheView;
using turboquant::DecodeArgs;
using turboquant::EncodeArgs;

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  return Status(StatusCode::kDeviceError, std::string(what) + ": " + cudaGetErrorString(e));
}

// One device allocation, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  Status alloc(std::size_t bytes) {
    bytes_ = bytes;
    return cuda_status(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 256)), "cudaMalloc");
  }
  // Allocates and copies `bytes` from the host (nothing to copy when null).
  Status upload(const void* host, std::size_t bytes) {
    if (Status s = alloc(bytes); !s.ok()) return s;
    if (host == nullptr || bytes == 0) return Status();
    return cuda_status(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  Status download(void* host) const {
    return cuda_status(cudaMemcpy(host, ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

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
  CudaBackend(tqc::CudaMode mode, std::string isa) : mode_(mode), isa_(std::move(isa)) {}
  std::string name() const override { return std::string("cuda:") + tqc::mode_name(mode_); }
  std::string isa() const override { return isa_; }
  int threads() const override { return 1; }
  Status decode(const ConstCacheView& cache, const DecodeArgs& args) override {
    return tqc::decode_from_host(cache, args, mode_);
  }
  Status encode(const CacheView& cache, const EncodeArgs& args) override { return tqc::encode_from_host(cache, args); }

  Status timed_decode(const ConstCacheView& cache, const DecodeArgs& args, const TimingPlan& plan,
                      std::vector<double>* ms) override {
    if (Status s = turboquant::validate_decode(cache, args); !s.ok()) return s;
    DeviceBuffer dcache, query, table, lens, out, lse, rotation, workspace;
    for (Status s :
         {dcache.upload(cache.data, static_cast<std::size_t>(cache.bytes())),
          query.upload(args.query.data, args.query.bytes), table.upload(args.block_table.data, args.block_table.bytes),
          lens.upload(args.seq_lens.data, args.seq_lens.bytes), out.alloc(args.out.bytes), lse.alloc(args.lse.bytes),
          rotation.upload(args.rotation.data, args.rotation.bytes),
          workspace.alloc(tqc::decode_workspace_bytes(args.batch, args.num_q_heads, args.num_splits,
                                                      cache.layout.format.head_dim))}) {
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
    const turboquant::MutableBuffer ws{workspace.get(), workspace.bytes()};
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
    if (args.lse.data != nullptr) return lse.download(args.lse.data);
    return Status();
  }

  Status timed_encode(const CacheView& cache, const EncodeArgs& args, double* ms) override {
    if (Status s = turboquant::validate_encode(cache, args); !s.ok()) return s;
    DeviceBuffer dcache, keys, values, slots, rotation;
    for (Status s : {dcache.upload(cache.data, static_cast<std::size_t>(cache.bytes())),
                     keys.upload(args.keys.data, args.keys.bytes), values.upload(args.values.data, args.values.bytes),
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
    if (!a.alloc(kBytes).ok() || !b.alloc(kBytes).ok()) return 0;
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

std::unique_ptr<Backend> make_cuda_backend(const BackendRequest& r) {
  if (const Status s = tqc::device_status(); !s.ok()) {
    fail_unavailable("backend " + r.name + ": no CUDA device found (" + s.message() + ")");
  }
  if (!r.isa.empty()) fail("--isa", r.isa + ": applies to the CPU backends only, not " + r.name);
  std::smatch m;
  const std::string description = tqc::device_description();
  const std::string isa = std::regex_search(description, m, std::regex("sm_[0-9]+")) ? m.str() : "cuda";
  return std::make_unique<CudaBackend>(r.name == "cuda" ? tqc::CudaMode::kFast : tqc::CudaMode::kStrict, isa);
}

}  // namespace tq
