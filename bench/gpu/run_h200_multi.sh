#!/usr/bin/env bash
# Round 8 of docs/PERFORMANCE.md in one device call (logs to $OUT): build test_gpu + bench_gpu, test_gpu,
# memcheck of the multi-token tests,
# the single-token compare against the baseline binary, and the multi-token bench.
set -u
source .gpu-deps/setup.sh > /dev/null 2>&1
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=ON \
  -DTURBOQUANT_ENABLE_BENCH=ON -DTURBOQUANT_ENABLE_TOOLS=OFF > $OUT/cfg.log 2>&1 &&
  cmake --build $B --target test_gpu bench_gpu -j16 > $OUT/build.log 2>&1
echo "build rc=$? at $SECONDS s"; grep -E "error" $OUT/build.log | head -5
timeout 120 $B/tests/test_gpu --gtest_color=no > $OUT/test_gpu.log 2>&1; echo "test_gpu rc=$?"
grep -E "PASSED|FAILED|SKIPPED \]" $OUT/test_gpu.log | head -12
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_gpu --gtest_filter='GpuMultiToken.*:*GpuMultiTokenGrid*/2*' --gtest_color=no > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck.log
BASE=$PWD/.gpu-deps/baseline/bench_gpu_b6d64c6
for i in 1 2 3; do $BASE --mode fast --csv $OUT/cmp-base-$i.csv > /dev/null; $B/bench/gpu/bench_gpu --mode fast --layout soa --csv $OUT/cmp-cur-$i.csv > /dev/null; done
python3 bench/gpu/compare_bench.py --baseline $OUT/cmp-base-*.csv --current $OUT/cmp-cur-*.csv > $OUT/compare.log 2>&1; grep -E "decode|geometric" $OUT/compare.log
echo "at $SECONDS s"
timeout 150 $B/bench/gpu/bench_gpu --preset 4bit_nc --shape 1x4096,8x8192,16x32768 --q-len 1,2,4,8,16,128 --csv $OUT/multi.csv > $OUT/multi.log 2>&1; echo "multi rc=$?"
grep -A300 summary $OUT/multi.log | grep -E "decode fast" | head -80
echo "done at $SECONDS s"
