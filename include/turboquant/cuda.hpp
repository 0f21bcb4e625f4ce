// The CUDA backend (turboquant::cuda): encode and decode on an NVIDIA GPU.
// No CUDA header is needed to use it: streams are passed as `void*`
// (a cudaStream_t; nullptr is the legacy default stream).
//
// Two decode modes behind one API:
//   kStrict  bit-exact with decode_reference (out and LSE): fp32 CUDA cores,
//            _rn intrinsics, the contract's exp2/log2, vLLM's split plan.
//   kFast    tensor cores (mma.sync m16n8k16, fp16 operands, fp32 accumulation),
//            the GQA group as the M dimension; relative L2 <= 1e-3 vs the golden
//            model. It picks its own split plan (tile-aligned; the number of
//            splits follows the device's occupancy), so results depend on the
//            GPU model. Layouts it does not handle (block_size not a multiple of
//            16, a cache pointer not 16-byte aligned, key/value bits other than
//            the four presets') run the strict kernel instead;
//            decode_kernel_name() says which one a call uses.
// Multi-token rows, attention sinks and sliding windows (DecodeArgs::
// query_start_loc, sinks, sliding_window; docs/ARITHMETIC.md §7) run in both
// modes. Strict: one grid row per query row over its own attended range,
// bit-exact with the golden model. Fast: a block takes R = max(1, 8 / group)
// consecutive rows of one sequence with its heads as the mma's 8 columns, so a
// K/V tile is read once for all of them (each column masked to its own causal
// or windowed range), within the fast bound; its grid's z is rows / R + batch
// (past 65535 the strict kernels run instead).
// Both modes support the head_dims of supported_head_dims() (64, 128 and 256
// unless the build sets TURBOQUANT_CUDA_HEAD_DIMS).
//
// Launch contract (CUTLASS style): can_implement() checks everything that can be
// checked on the host, workspace_bytes() sizes the scratch buffer, decode() /
// run() enqueue kernels on `stream` and return: they allocate nothing and never
// synchronize the host.
//
// Grids. The decode kernel's grid is (S', num_kv_heads * chunks, batch), with
// chunks = ceil(group / heads per block) (group = num_q_heads / num_kv_heads;
// 8 heads per block in fast mode, 1, 2 or 4 by group in strict mode), and the
// merge's is (num_q_heads, batch) with head_dim threads. S' follows from S,
// the splits the kernels run:
//   strict  S = num_splits. The one-warp-per-split kernel runs ceil(S / 2)
//           blocks of 2 warps (S' = ceil(S / 2)); when S * num_kv_heads *
//           chunks * batch < 4 * the device's SM count, the kernel with
//           min(4, head_dim / 32) warps per split runs instead (S' = S).
//   fast    S' = S = clamp(SMs * resident blocks per SM / (batch *
//           num_kv_heads * chunks), 1, stride): the device's SM count and the
//           kernel's occupancy on it, and stride = the most splits in
//           [num_splits, max(num_splits, min(256, 2048 / batch))] that the
//           workspace's size holds (S = num_splits if the occupancy query
//           fails). The merge's shared memory grows with S.
// So the grids depend on (batch, num_q_heads, num_kv_heads, num_splits, mode,
// format, head_dim), the workspace size (fast) and the device (its SM count;
// the fast kernel's occupancy), never on the contents of query / seq_lens /
// block_table / cache: a call can be captured into a CUDA graph and replayed
// with new contents; a different workspace size or another GPU wants a new
// capture (or plan). Encode: min(ceil(num_tokens * num_kv_heads / (token,
// head) items per block), SMs * resident encode blocks per SM) blocks.
//
// Pointers. In DecodeArgs and EncodeArgs passed to the device entry points, every
// buffer (cache.data, query, block_table, seq_lens, out, lse, rotation, keys,
// values, slot_mapping) is a DEVICE pointer; `bytes` still gives its size.
// `codebook` stays a host pointer (it is copied into the kernel parameters).
// The host cannot read device memory without synchronizing, so the device entry
// points check shapes, sizes, null pointers, alignment and the codebook, but not
// the *contents* of block_table, seq_lens, slot_mapping (range, duplicates) or
// the finiteness of query/K/V: those are trusted. validate_*_device() checks them
// by copying them back (synchronous, for debugging). The *_from_host wrappers
// take host pointers, run the full host validation first, copy, run and copy
// back (synchronous; for tools and tests).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "turboquant/cache_view.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/status.hpp"

namespace turboquant::cuda {

// --- device ------------------------------------------------------------------

// ok when a CUDA device is usable; kBackendUnavailable (with the CUDA error text)
// when there is none or no driver.
Status device_status();
inline bool device_available() { return device_status().ok(); }
// "NVIDIA H200 (sm_90, 132 SMs, driver 13000)" or the reason there is none.
std::string device_description();
// The head_dims the build's kernels are instantiated for (the CMake list
// TURBOQUANT_CUDA_HEAD_DIMS; default 64, 128, 256): decode and encode support
// exactly these.
std::vector<int> supported_head_dims();

// --- decode ------------------------------------------------------------------

enum class CudaMode { kStrict, kFast };
const char* mode_name(CudaMode mode);  // "strict", "fast"

// Bytes of scratch a decode of up to `max_batch` query rows needs (rows:
// sequences, or with query_start_loc the T query rows): per (row, query head,
// split) an fp32 accumulator [head_dim] plus (max, sum). It has room
// for max(num_splits, min(256, 2048 / max_batch)) splits, because fast mode may
// cut short batches into more splits than num_splits (more blocks in flight).
// Any larger buffer works; it must be 256-byte aligned. 0 for non-positive
// arguments or a size beyond size_t.
std::size_t decode_workspace_bytes(int max_batch, int num_q_heads, int num_splits, int head_dim);

// Everything checkable without reading device memory (see the header comment).
Status decode_can_implement(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode);

// The kernel a call with these arguments uses: "cuda:strict" or "cuda:fast".
const char* decode_kernel_name(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode);

// Enqueues the decode. `workspace` is a device buffer of at least
// decode_workspace_bytes(decode_query_rows(args), args.num_q_heads, args.num_splits, head_dim).
// Calls decode_can_implement first (host-only work, no device access), then
// asks the runtime whether every buffer is device-accessible memory: a plain
// host pointer is kInvalidArgument naming the argument (instead of a fault
// inside the kernel). CUDA launch errors come back as kDeviceError;
// asynchronous faults (e.g. a freed device buffer) surface at the caller's next
// synchronization.
Status decode(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode, MutableBuffer workspace,
              void* stream);

// --- decode plan ---------------------------------------------------------------
//
// A decode plan is made once per layer shape and holds what decode() would
// otherwise work out on every call: the decode_can_implement result, the
// kernel choice and launch configuration (split plan, heads per block, the
// workspace's partial stride), the codebook in the kernel parameters, and the
// check that the plan's buffers (cache, query, block_table, seq_lens, out, lse,
// rotation, workspace) are device-accessible. run() then enqueues the kernels
// with the call's pointers: no validation, no cudaPointerGetAttributes, no
// allocation; it only compares the call's shape with the plan's (a few integer
// comparisons) and refuses a mismatch with kInvalidArgument naming the field.
// The cache (its layout, data and num_blocks) is the plan's; pointers in the
// call's args that differ from the plan's are trusted to be device memory.
// Run a plan on the device that was current when it was made (its split plan
// follows that device's SM count and occupancy). Copyable (shared, immutable).
class DecodePlan {
 public:
  DecodePlan() = default;  // no plan: run() refuses it
  bool valid() const { return impl_ != nullptr; }
  // "cuda:strict" or "cuda:fast" ("" without a plan).
  const char* kernel_name() const;
  // Splits of the decode grid's x dimension the kernels run (see grid below).
  int splits() const;
  // Bytes of the workspace the launch uses (at most the plan's workspace.bytes).
  std::size_t workspace_bytes() const;

  struct Impl;  // gpu/src/decode_setup.hpp

 private:
  std::shared_ptr<const Impl> impl_;
  friend Status make_decode_plan(const ConstCacheView&, const DecodeArgs&, CudaMode, MutableBuffer, DecodePlan*);
  friend Status run(const DecodePlan&, const DecodeArgs&, MutableBuffer, void*);
};

// Makes the plan of decodes shaped like `args` over `cache` (every check of
// decode(), the device-pointer queries included). `workspace` is the device
// buffer the calls will use (its size fixes the fast plan's split stride;
// later calls may pass another one of at least plan.workspace_bytes() bytes).
// On error *plan is left empty.
Status make_decode_plan(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode, MutableBuffer workspace,
                        DecodePlan* plan);

// Enqueues the decode of a plan: args must have the plan's shape (batch,
// num_q_heads, max_blocks_per_seq, num_splits, query/out dtypes, softmax_scale,
// codebook, whether lse and rotation are given) and buffers at least as large
// as the shape needs; workspace at least plan.workspace_bytes(), 256-byte
// aligned. The contents (seq_lens, block_table, query) are trusted as in decode().
Status run(const DecodePlan& plan, const DecodeArgs& args, MutableBuffer workspace, void* stream);

// Copies seq_lens, block_table and the query back to the host and runs
// validate_decode on them (synchronizes `stream`). For debugging and tools.
Status validate_decode_device(const ConstCacheView& cache, const DecodeArgs& args, void* stream);

// Host pointers in, host pointers out: validate_decode, copy the cache (only the
// `cache.bytes()` bytes), query and tables to the device, decode, copy out/lse
// back, free. Synchronous.
Status decode_from_host(const ConstCacheView& cache, const DecodeArgs& args, CudaMode mode);

// --- encode ------------------------------------------------------------------

// Checks shapes, sizes, pointers and the codebook (sorted midpoints, which the
// kernel's binary-search bucketize relies on). head_dim must be one of
// supported_head_dims().
Status encode_can_implement(const ConstCacheView& cache, const EncodeArgs& args);

// Enqueues the encode: writes exactly the key bytes, value bytes and metadata of
// the slots in slot_mapping (negative slots are skipped), byte-identical to
// encode_reference. Grid: see "Grids" above (num_tokens, num_kv_heads, the
// device's SM count). Host pointers are rejected as in decode().
Status encode(const CacheView& cache, const EncodeArgs& args, void* stream);

// Copies slot_mapping and K/V back and runs validate_encode (synchronizes).
Status validate_encode_device(const ConstCacheView& cache, const EncodeArgs& args, void* stream);

// Host pointers: validate_encode, copy the inputs to the device, encode into a
// device cache of cache.bytes(), and copy back exactly the bytes the encode
// wrote (its slots' records and metadata; every other host byte is neither
// read nor written, so concurrent calls into disjoint slots compose). Synchronous.
Status encode_from_host(const CacheView& cache, const EncodeArgs& args);

// --- dequantize ----------------------------------------------------------------

// Checks shapes, sizes, pointers and the codebook (no device memory is read:
// slot, block and seq_len values are trusted as in decode()).
Status dequantize_can_implement(const ConstCacheView& cache, const DequantizeArgs& args);
Status dequantize_sequences_can_implement(const ConstCacheView& cache, const DequantizeSequencesArgs& args);

// Enqueues the dequantize of a list of slots / of whole sequences through a
// block table (dequantize.hpp): the fp32 outputs are dequantize_reference's
// bits, fp16 / bf16 those rounded to nearest even. Device pointers; allocates
// nothing, never synchronizes the host. Grid: min(ceil(items * Hk / 128),
// 16 * SMs) blocks of 128 threads (items = num_slots, or batch * max_seq).
Status dequantize(const ConstCacheView& cache, const DequantizeArgs& args, void* stream);
Status dequantize_sequences(const ConstCacheView& cache, const DequantizeSequencesArgs& args, void* stream);

// Host pointers: validate_dequantize*, copy in, run, copy back. Synchronous.
Status dequantize_from_host(const ConstCacheView& cache, const DequantizeArgs& args);
Status dequantize_sequences_from_host(const ConstCacheView& cache, const DequantizeSequencesArgs& args);

}  // namespace turboquant::cuda
