#!/usr/bin/env bash
# The current tree's fast decode against an older commit's, in one device call:
# both built on the device, then bench_gpu --mode fast --layout both of each,
# interleaved (TQ_ROUNDS rounds, default 3), and compare_bench.py over the CSVs.
# The older source travels in the ignored .gpu-deps (here, before the call):
#   rm -rf .gpu-deps/baseline-src && mkdir -p .gpu-deps/baseline-src &&
#   git archive <commit> -- . ':!tests/data' | tar -x -C .gpu-deps/baseline-src
# Device command: OUT=$OUT bash bench/gpu/run_h200_against_source.sh [run_h200.sh steps]
# (default steps build,test,multi; carry .gpu-deps). PERFORMANCE.md round 13 ran these
# commands from a script in .gpu-deps; this copy of them has not run in this form.
set -uo pipefail
steps=${1:-build,test,multi}
source .gpu-deps/setup.sh > /dev/null 2>&1
(cmake -S .gpu-deps/baseline-src -B /tmp/baseline -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
   -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_TESTS=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF -DTURBOQUANT_ENABLE_BENCH=ON &&
 cmake --build /tmp/baseline --target bench_gpu -j6) > "$OUT/baseline-build.log" 2>&1 &
baseline_build=$!
TQ_BUDGET_S=${TQ_BUDGET_S:-380} bash bench/gpu/run_h200.sh "$steps" 2>&1 |
  grep -v '^\[ \|^\[--\|^$\|ptxas\|Building\|Linking' | tail -12
wait $baseline_build || { echo "baseline build failed"; tail -20 "$OUT/baseline-build.log"; exit 1; }
for ((i = 1; i <= ${TQ_ROUNDS:-3}; ++i)); do
  timeout 100 /tmp/baseline/bench/gpu/bench_gpu --mode fast --layout both --csv "$OUT/cmp-base-$i.csv" > /dev/null 2>&1
  timeout 100 build-gpu/bench/gpu/bench_gpu --mode fast --layout both --csv "$OUT/cmp-cur-$i.csv" > /dev/null 2>&1
done
python3 bench/gpu/compare_bench.py --baseline "$OUT"/cmp-base-*.csv --current "$OUT"/cmp-cur-*.csv --limit 1.02
rc=$?
# Few files come back from a device call: the CSVs in one archive.
(cd "$OUT" && tar czf compare.tgz cmp-*.csv && rm -f cmp-*.csv baseline-build.log build.log info.log)
exit $rc
