// Concurrent calls: many std::threads decoding the same cache at once (every
// backend, mixed thread counts and ISAs) give the bits of a single call;
// concurrent encodes into disjoint slots of one cache give the bytes of one
// encode; the lazily built codebook cache is safe to race on. Both layouts
// (in AoS the slots of one block are neighbours in memory, so concurrent
// encodes of one block write adjacent bytes). Run under ThreadSanitizer by
// `make sanitize` (label "reliability").
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "reliability/reliability_util.hpp"

namespace tq_rel {
namespace {

constexpr int kThreads = 8;

TEST(Concurrency, ManyThreadsDecodingOneCacheGetTheBitsOfOneCall) {
  const std::uint32_t s = seed(51);
  for (const Format& format : {core::preset_format(Preset::kK3V4Nc, 128),
                               core::preset_format(Preset::kK3V4Nc, 128, LayoutKind::kAoS),
                               core::preset_format(Preset::kK8V4, 128, LayoutKind::kAoS, Fp8Format::kE4b15)}) {
  tqt::ProblemSpec spec;
  spec.format = format;
  spec.num_kv_heads = 2;
  spec.group = 4;
  spec.seq_lens = {300, 17, 0, 129};
  spec.seed = s;
  const tqt::Problem p = tqt::make_problem(spec);
  std::vector<float> want_out, want_lse;
  ASSERT_TRUE(decode_reference(p.view(), p.args(want_out, want_lse, 7)).ok());

  std::vector<std::function<Status(const ConstCacheView&, const DecodeArgs&)>> paths;
  for (const DecodeBackend& be : decode_backends()) paths.push_back(be.decode);
#if TQ_REL_HAVE_CPU
  for (int threads : {0, 3, 4}) {
    for (const std::string& isa : available_isas()) {
      CpuOptions o;
      o.threads = threads;
      o.isa = isa;
      paths.push_back([o](const ConstCacheView& c, const DecodeArgs& a) { return decode_cpu(c, a, o); });
    }
  }
#endif
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (int iter = 0; iter < 6; ++iter) {
        const auto& decode = paths[(t + iter) % paths.size()];
        std::vector<float> out, lse;
        if (!decode(p.view(), p.args(out, lse, 7)).ok()) ++failures;
        if (!bits_equal(out, want_out) || !bits_equal(lse, want_lse)) ++mismatches;
      }
    });
  }
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0) << describe(format);
  EXPECT_EQ(mismatches.load(), 0) << describe(format) << ": a concurrent decode differed from the single call";
  }
}

TEST(Concurrency, ConcurrentEncodesIntoDisjointSlotsOfOneCache) {
  // Slots of one block share the block's metadata region (SoA) or sit side by
  // side (AoS): interleave the slots of every block across the threads.
  const std::uint32_t s = seed(52);
  for (LayoutKind layout : {LayoutKind::kSoA, LayoutKind::kAoS}) {
    tqt::ProblemSpec spec;
    spec.format = core::preset_format(Preset::k3BitNc, 64, layout);
    spec.num_kv_heads = 3;
    spec.group = 1;
    spec.seq_lens = {160};
    spec.seed = s;
    const tqt::Problem p = tqt::make_problem(spec);  // p.cache: one sequential encode
    const int dims = 64, row = 3 * dims;
    for (const EncodeBackend& be : encode_backends()) {
      std::vector<std::uint8_t> cache(p.cache.size(), 0);
      std::atomic<int> failures{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
          std::vector<float> k, v;
          std::vector<std::int64_t> slots;
          for (std::size_t i = t; i < p.slots.size(); i += kThreads) {
            slots.push_back(p.slots[i]);
            k.insert(k.end(), p.keys.begin() + i * row, p.keys.begin() + (i + 1) * row);
            v.insert(v.end(), p.values.begin() + i * row, p.values.begin() + (i + 1) * row);
          }
          EncodeArgs e;
          e.keys = {k.data(), k.size() * 4};
          e.values = {v.data(), v.size() * 4};
          e.num_tokens = static_cast<std::int64_t>(slots.size());
          e.slot_mapping = {slots.data(), slots.size() * 8};
          if (!be.encode(CacheView{p.layout, cache.data(), p.num_blocks}, e).ok()) ++failures;
        });
      }
      for (std::thread& th : pool) th.join();
      EXPECT_EQ(failures.load(), 0) << be.name << " " << layout_name(layout);
      EXPECT_TRUE(cache == p.cache) << be.name << " " << layout_name(layout) << ": concurrent encodes differ from one encode";
    }
  }
}

TEST(Concurrency, CodebookCacheFirstUseFromManyThreads) {
  // (head_dim, bits) pairs no other test asks for, so the first call races.
  const std::pair<int, int> keys[] = {{40, 2}, {40, 3}, {72, 1}, {72, 4}};
  std::vector<const Codebook*> seen(kThreads * std::size(keys));
  std::vector<std::thread> pool;
  std::atomic<bool> go{false};
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (std::size_t i = 0; i < std::size(keys); ++i) {
        seen[t * std::size(keys) + i] = &vllm_codebook(keys[i].first, keys[i].second);
      }
    });
  }
  go = true;
  for (std::thread& th : pool) th.join();
  for (std::size_t i = 0; i < std::size(keys); ++i) {
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t * std::size(keys) + i], seen[i]) << "one table per key";
    EXPECT_EQ(seen[i]->bits, keys[i].second);
  }
}

}  // namespace
}  // namespace tq_rel
