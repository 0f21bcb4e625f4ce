// The ceiling a benchmark is compared with: memory-read bandwidth measured in
// the same process, with the same number of threads.
#pragma once

namespace turboquant::bench {

// Best of a few passes summing a 512 MiB buffer with `threads` threads (GB/s,
// 1e9 bytes). Measured once per thread count, then cached.
double read_bandwidth_gbps(int threads);

}  // namespace turboquant::bench
