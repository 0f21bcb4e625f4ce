// A deterministic reader that turns fuzzer bytes into arguments. Every read
// succeeds: past the end it yields zeros, so any byte string is a valid input
// (the same bytes always give the same problem, which makes a corpus file a
// regression test). No libFuzzer header is needed, so the targets also build
// with g++ for the corpus replay test (tests/reliability/test_fuzz_corpus.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tq_fuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}

  std::uint8_t u8() { return pos_ < n_ ? p_[pos_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return u16() | (std::uint32_t{u16()} << 16); }
  std::uint64_t u64() { return u32() | (std::uint64_t{u32()} << 32); }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  bool flag() { return (u8() & 1) != 0; }
  float f32() {
    const std::uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // Uniform-ish in [lo, hi] (inclusive), hi - lo < 2^32.
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
    const std::uint64_t v = span <= 256 ? u8() : (span <= 65536 ? u16() : u32());
    return lo + static_cast<std::int64_t>(v % span);
  }
  template <class T, std::size_t N>
  T pick(const T (&options)[N]) {
    return options[u8() % N];
  }
  // An int that is usually "interesting": small, a boundary, or raw.
  std::int32_t wild_i32() {
    static const std::int32_t kEdges[] = {0, 1, -1, 2, 15, 16, 17, 4096, 4097, 1 << 20, 1 << 30, -(1 << 30),
                                          std::numeric_limits<std::int32_t>::max(),
                                          std::numeric_limits<std::int32_t>::max() - 15,
                                          std::numeric_limits<std::int32_t>::min()};
    switch (u8() % 4) {
      case 0: return pick(kEdges);
      case 1: return static_cast<std::int32_t>(range(-4, 64));
      default: return i32();
    }
  }
  std::int64_t wild_i64() {
    static const std::int64_t kEdges[] = {0, 1, -1, 1LL << 31, (1LL << 31) - 1, 1LL << 32, 1LL << 40, 1LL << 62,
                                          std::numeric_limits<std::int64_t>::max(),
                                          std::numeric_limits<std::int64_t>::min()};
    switch (u8() % 4) {
      case 0: return pick(kEdges);
      case 1: return range(-4, 64);
      default: return i64();
    }
  }
  std::size_t remaining() const { return n_ - pos_; }
  const std::uint8_t* here() const { return p_ + pos_; }
  void skip(std::size_t k) { pos_ += k < remaining() ? k : remaining(); }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// Cheap deterministic filler for large buffers (cache bytes) from a 32-bit seed.
inline void fill_bytes(std::uint8_t* out, std::size_t n, std::uint32_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<std::uint8_t>(x >> 24);
  }
}

// A failed invariant: abort so that libFuzzer (and the replay test) report it
// with a stack trace, naming the check.
[[noreturn]] void fail(const char* what);

}  // namespace tq_fuzz
