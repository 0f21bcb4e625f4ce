// Encode on the GPU: the cache bytes must equal encode_reference's, for both
// layouts and both FP8 flavours, every preset, head_dim, input dtype, block
// sizes including odd ones, with padding slots (-1), constant and zero
// vectors (value-scale floor), large values (fp16 clamp, fp8 saturation),
// operands outside the shared-reciprocal division's range (tiny elements, huge
// norms and scales), misaligned inputs and cache, and a dense rotation; and no
// byte outside the stored slots may change (canary).
#include <cuda_runtime.h>

#include <limits>

#include "gpu_test_support.hpp"

namespace {

using namespace tq_gpu_test;

struct EncodeCase {
  Preset preset;
  int head_dim;
  int block_size;
  int num_kv_heads;
  int num_tokens;
  DType dtype;
  bool dense_rotation;
  std::size_t misalign = 0;  // > 0: device buffers at this byte offset (inputs: one element)
  LayoutKind layout = LayoutKind::kSoA;
  Fp8Format fp8 = Fp8Format::kE4m3;
};

inline constexpr std::uint8_t kCanary = 0x5a;

// The bytes an encode of these slots may write, from BlockLayout: each stored
// slot's record (SoA: its key and value codes; AoS: the whole slot) and its
// metadata fields.
std::vector<bool> stored_bytes(const BlockLayout& l, std::int64_t num_blocks, const std::vector<std::int64_t>& slots) {
  std::vector<bool> mask(static_cast<std::size_t>(num_blocks * l.block_bytes()), false);
  const auto mark = [&](std::int64_t at, int bytes) {
    for (int i = 0; i < bytes; ++i) mask[static_cast<std::size_t>(at + i)] = true;
  };
  for (std::int64_t slot : slots) {
    if (slot < 0) continue;
    const std::int64_t base = l.block_base(slot / l.block_size);
    const int t = static_cast<int>(slot % l.block_size);
    for (int h = 0; h < l.num_kv_heads; ++h) {
      mark(base + l.key_data_offset(t, h), l.format.record_bytes());
      for (MetaField f : {MetaField::kKeyNorm, MetaField::kValueScale, MetaField::kValueZero}) {
        if (f != MetaField::kKeyNorm || !l.format.fp8_keys()) mark(base + l.meta_field_offset(t, h, f), 2);
      }
    }
  }
  return mask;
}

// cuda::encode on device copies placed `offset` bytes (cache) and one element
// (keys, values) past an aligned address: the kernel's narrow load and store paths.
Status encode_misaligned(const CacheView& cache, const EncodeArgs& a, std::size_t offset) {
  const std::size_t bytes = static_cast<std::size_t>(cache.bytes());
  const std::size_t element = dtype_size(a.dtype);
  DeviceMem d_cache(bytes), d_keys(a.keys.bytes), d_values(a.values.bytes), d_slots(a.slot_mapping.bytes),
      d_rot(a.rotation.bytes);
  EXPECT_EQ(cudaMemcpy(d_cache.at(offset), cache.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_keys.at(element), a.keys.data, a.keys.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_values.at(element), a.values.data, a.values.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d_slots.p, a.slot_mapping.data, a.slot_mapping.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EncodeArgs da = a;
  da.keys = {d_keys.at(element), a.keys.bytes};
  da.values = {d_values.at(element), a.values.bytes};
  da.slot_mapping = {d_slots.p, a.slot_mapping.bytes};
  if (a.rotation.data != nullptr) {
    EXPECT_EQ(cudaMemcpy(d_rot.p, a.rotation.data, a.rotation.bytes, cudaMemcpyHostToDevice), cudaSuccess);
    da.rotation = {d_rot.p, a.rotation.bytes};
  }
  const Status s = cuda::encode(CacheView{cache.layout, d_cache.at(offset), cache.num_blocks}, da, nullptr);
  if (!s.ok()) return s;
  EXPECT_EQ(cudaMemcpy(cache.data, d_cache.at(offset), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return Status();
}

void run_case(const EncodeCase& ec, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const BlockLayout l{preset_format(ec.preset, ec.head_dim, ec.layout, ec.fp8), ec.block_size, ec.num_kv_heads};
  const std::int64_t num_blocks = (ec.num_tokens + ec.block_size - 1) / ec.block_size + 3;
  const int dims = ec.head_dim;
  const std::size_t count = std::size_t(ec.num_tokens) * ec.num_kv_heads * dims;
  std::vector<std::uint8_t> keys, values;
  fill_elements(keys, ec.dtype, count, rng, 1.0f);
  fill_elements(values, ec.dtype, count, rng, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  for (int i = 0; i < ec.num_tokens; ++i) {
    for (int h = 0; h < ec.num_kv_heads; ++h) {
      const std::int64_t base = (std::int64_t{i} * ec.num_kv_heads + h) * dims;
      const int kind = pick(rng);
      for (int d = 0; d < dims; ++d) {
        float kv = detail::load_element(keys.data(), ec.dtype, base + d);
        float vv = detail::load_element(values.data(), ec.dtype, base + d);
        if (kind == 0) vv = 0.25f;                                   // constant value vector: scale floor
        if (kind == 1) kv = vv = 0.0f;                               // zero vectors
        if (kind == 2) {                                             // outliers: fp8 saturation, fp16 clamp
          kv *= 3000.0f;
          vv *= (ec.dtype == DType::kFloat16 ? 3000.0f : 1.0e6f);
        }
        if (kind == 3 && d % 7 == 0) vv = -0.0f;                     // signed zeros in the min/max scan
        const bool wide = ec.dtype != DType::kFloat16;               // fp16 has no tiny or huge values
        if (kind == 4 && wide) kv *= 1.0e-30f;                       // tiny key: dividends below range
        if (kind == 5 && wide) {                                     // norm and value scale above 2^40
          kv *= 1.0e14f;
          vv *= 1.0e14f;
        }
        if (kind == 6 && wide && d % 9 == 0) kv = 1.0e-35f;          // one tiny element in a normal key
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float inf = std::numeric_limits<float>::infinity();
        if (kind == 7 && d == 5) vv = nan;                           // non-finite inputs
        if (kind == 7 && d == 9) kv = nan;
        if (kind == 8 && d == 0) vv = nan;                           // v[0] NaN: the scans return NaN
        if (kind == 8 && d == 3) kv = inf;
        if (kind == 9 && d == 1) vv = -inf;
        detail::store_element(keys.data(), ec.dtype, base + d, kv);
        detail::store_element(values.data(), ec.dtype, base + d, vv);
      }
    }
  }
  std::vector<std::int64_t> slots(num_blocks * ec.block_size);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(ec.num_tokens);
  for (int i = 0; i < ec.num_tokens; i += 11) slots[i] = -1;  // padding tokens are skipped
  std::vector<float> rotation;
  if (ec.dense_rotation) {
    std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(float(dims)));
    rotation.resize(std::size_t(dims) * dims);
    for (float& x : rotation) x = nd(rng);
  }
  EncodeArgs a;
  a.keys = {keys.data(), keys.size()};
  a.values = {values.data(), values.size()};
  a.dtype = ec.dtype;
  a.num_tokens = ec.num_tokens;
  a.slot_mapping = {slots.data(), slots.size() * 8};
  if (!rotation.empty()) a.rotation = {rotation.data(), rotation.size() * 4};
  a.check_finite = false;  // the non-finite kinds above are part of the test
  const std::size_t bytes = static_cast<std::size_t>(num_blocks * l.block_bytes());
  std::vector<std::uint8_t> ref(bytes, kCanary), gpu(bytes, kCanary);
  const Status rs = encode_reference(CacheView{l, ref.data(), num_blocks}, a);
  ASSERT_TRUE(rs.ok()) << rs.to_string();
  const Status gs = ec.misalign > 0 ? encode_misaligned(CacheView{l, gpu.data(), num_blocks}, a, ec.misalign)
                                    : cuda::encode_from_host(CacheView{l, gpu.data(), num_blocks}, a);
  ASSERT_TRUE(gs.ok()) << gs.to_string();
  const std::int64_t at = first_difference(ref.data(), gpu.data(), bytes);
  EXPECT_EQ(at, -1) << "first differing cache byte " << at << " (block " << (at < 0 ? -1 : at / l.block_bytes())
                    << ", offset " << (at < 0 ? -1 : at % l.block_bytes()) << ")";
  const std::vector<bool> stored = stored_bytes(l, num_blocks, slots);
  std::int64_t changed = 0, first_changed = -1, written = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    written += stored[i];
    if (!stored[i] && gpu[i] != kCanary) {
      if (changed++ == 0) first_changed = static_cast<std::int64_t>(i);
    }
  }
  EXPECT_EQ(changed, 0) << "bytes outside the stored slots changed, first at " << first_changed;
  EXPECT_GT(written, 0);
}

std::string describe(const EncodeCase& ec) {
  std::string s = std::string(core::layout_name(ec.layout)) + " " + preset_name(ec.preset);
  if (ec.preset == Preset::kK8V4) s += std::string(" ") + core::fp8_format_name(ec.fp8);
  return s + " D=" + std::to_string(ec.head_dim) + " bs=" + std::to_string(ec.block_size) + " Hk=" +
         std::to_string(ec.num_kv_heads) + " dtype " + dtype_name(ec.dtype) +
         (ec.misalign ? " cache offset " + std::to_string(ec.misalign) : std::string()) +
         (ec.dense_rotation ? " dense rotation" : "");
}

// Every preset and head_dim in one layout; the FP8 preset in both flavours.
void encode_grid(LayoutKind layout, std::uint32_t seed) {
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  const int blocks[] = {16, 32, 64, 1, 17, 5};
  int index = 0;
  for (Preset preset : kAllPresets) {
    for (int dims : {64, 128, 256}) {
      EncodeCase ec{preset, dims, blocks[index % 6], 1 + index % 5, 300 + 37 * index, dtypes[index % 3], false};
      ec.layout = layout;
      for (Fp8Format fp8 : {Fp8Format::kE4m3, Fp8Format::kE4b15}) {
        if (fp8 == Fp8Format::kE4b15 && preset != Preset::kK8V4) continue;
        ec.fp8 = fp8;
        SCOPED_TRACE(describe(ec));
        run_case(ec, seed + index++);
      }
    }
  }
  for (Preset preset : {Preset::k4BitNc, Preset::k3BitNc}) {
    EncodeCase ec{preset, 128, 16, 2, 200, DType::kFloat32, true};
    ec.layout = layout;
    SCOPED_TRACE(describe(ec));
    run_case(ec, seed + index++);
  }
}

void misaligned_grid(LayoutKind layout, std::uint32_t seed) {
  int index = 0;
  for (Preset preset : kAllPresets) {
    for (int dims : {64, 128, 256}) {
      for (std::size_t offset : {1, 2, 4, 8}) {
        const DType dtype = index % 2 ? DType::kBFloat16 : DType::kFloat32;
        EncodeCase ec{preset, dims, 16, 2, 70, dtype, false, offset};
        ec.layout = layout;
        ec.fp8 = preset == Preset::kK8V4 && index % 2 ? Fp8Format::kE4b15 : Fp8Format::kE4m3;
        SCOPED_TRACE(describe(ec));
        run_case(ec, seed + index++);
      }
    }
  }
}

TEST(GpuEncode, BytesEqualGoldenEncode) {
  TQ_REQUIRE_DEVICE();
  const std::uint32_t seed = 4242;
  std::printf("seed %u\n", seed);
  encode_grid(LayoutKind::kSoA, seed);
}

TEST(GpuEncode, AosBytesEqualGoldenEncode) {
  TQ_REQUIRE_DEVICE();
  const std::uint32_t seed = 4343;
  std::printf("seed %u\n", seed);
  encode_grid(LayoutKind::kAoS, seed);
}

TEST(GpuEncode, MisalignedInputsAndCacheGiveTheSameBytes) {
  TQ_REQUIRE_DEVICE();
  misaligned_grid(LayoutKind::kSoA, 777);
}

TEST(GpuEncode, AosMisalignedInputsAndCacheGiveTheSameBytes) {
  TQ_REQUIRE_DEVICE();
  misaligned_grid(LayoutKind::kAoS, 778);
}

}  // namespace
