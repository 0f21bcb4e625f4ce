#!/usr/bin/env bash
# The current tree's fast decode against an older commit's, in one device call:
# the older source is built on the device next to this tree, then run_h200.sh's
# compare step times both (--mode fast --layout both, interleaved
# TQ_COMPARE_ROUNDS times) and compare_bench.py reports the ratios.
# The older source travels in the ignored .gpu-deps (here, before the call):
#   rm -rf .gpu-deps/baseline-src && mkdir -p .gpu-deps/baseline-src &&
#   git archive <commit> -- . ':!tests/data' | tar -x -C .gpu-deps/baseline-src
# Device command: OUT=$OUT bash bench/gpu/run_h200_against_source.sh [run_h200.sh steps]
# (default steps build,test,multi; carry .gpu-deps). TQ_BASELINE_CUDA_ARCH: the older
# source's CUDA architecture (default 90a; 90 for commits before the wide kernel's wgmma). PERFORMANCE.md round 14 ran it
# (round 13 ran the same builds and timings from a script in .gpu-deps).
set -uo pipefail
steps=${1:-build,test,multi}
source .gpu-deps/setup.sh > /dev/null 2>&1
(cmake -S .gpu-deps/baseline-src -B /tmp/baseline -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=${TQ_BASELINE_CUDA_ARCH:-90a} \
   -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_TESTS=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF -DTURBOQUANT_ENABLE_BENCH=ON &&
 cmake --build /tmp/baseline --target bench_gpu -j6) > "$OUT/baseline-build.log" 2>&1 &
baseline_build=$!
TQ_BUDGET_S=${TQ_BUDGET_S:-380} bash bench/gpu/run_h200.sh "$steps" 2>&1 |
  grep -v '^\[ \|^\[--\|^$\|ptxas\|Building\|Linking' | tail -12
wait $baseline_build || { echo "baseline build failed"; tail -20 "$OUT/baseline-build.log"; exit 1; }
TQ_BUDGET_S=150 TQ_BASELINE_BENCH=/tmp/baseline/bench/gpu/bench_gpu TQ_COMPARE_ARGS="${TQ_COMPARE_ARGS:---mode fast --layout both}" \
  bash bench/gpu/run_h200.sh compare
rc=$?
# Few files come back from a device call: the CSVs in one archive.
(cd "$OUT" && tar czf compare.tgz compare-*.csv && rm -f compare-*.csv baseline-build.log build.log info.log)
exit $rc
