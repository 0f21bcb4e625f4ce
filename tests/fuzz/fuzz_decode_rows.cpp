// libFuzzer entry point; the target itself is in fuzz_decode_rows.hpp (shared with the
// corpus replay test in tests/reliability).
#include "fuzz/fuzz_decode_rows.hpp"

#include <cstdio>
#include <cstdlib>

[[noreturn]] void tq_fuzz::fail(const char* what) {
  std::fprintf(stderr, "tq_fuzz invariant violated: %s\n", what);
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tq_fuzz::fuzz_decode_rows(data, size);
}
