#!/bin/bash
# Call A2 (session 36, warm after call A, the same tree): memcheck and racecheck over the
# multi-token and AoS fast tests (the wide kernel's interleaved loop, the column mask), and
# two more bench runs for the medians of issue 12's rows.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callA2.sh $OUT/
TQ_BUDGET_S=${TQ_A2_BUDGET:-400} TQ_SAN_FILTER='GpuMultiToken.*:GpuFastAos.*' bash bench/gpu/run_h200.sh memcheck,racecheck
source .gpu-deps/setup.sh > /dev/null 2>&1
for i in 2 3; do build-gpu/bench/gpu/bench_gpu --shape 1x4096,8x8192,32x8192,16x32768 --csv $OUT/bench-$i.csv > /dev/null; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
(cd "$OUT" && rm -f 00-all.tgz && tar czf /tmp/tq-all.tgz . && mv /tmp/tq-all.tgz "$OUT/00-all.tgz")
