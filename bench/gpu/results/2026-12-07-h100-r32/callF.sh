#!/bin/bash
# Call F (session 36): branch wip-wide-interleave as it will merge (the interleaved wide loop for
# SoA 3-bit keys and AoS FP8 keys; every other instance main's loop) against main's wide kernel
# (devrun/base-files), same host: the multi-token and case tests of the branch; bench_gpu wide
# rows of both builds interleaved (compare); multi of the branch; memcheck and racecheck over
# the wide tests.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callF.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
BASE=/tmp/tq-base; rm -rf $BASE; mkdir -p $BASE
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./devrun --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $BASE -xf -
cp -r devrun/base-files/. $BASE/
( cd $BASE && cmake -S . -B build-base -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_BENCH=ON -DTURBOQUANT_ENABLE_TOOLS=OFF -DTURBOQUANT_ENABLE_TESTS=OFF \
    > $OUT/build-base.log 2>&1 && cmake --build build-base --target bench_gpu -j8 >> $OUT/build-base.log 2>&1
  echo "base build rc=$? at $SECONDS s" >> $OUT/build-base.log ) &
TQ_BUDGET_S=250 TQ_TEST_FILTER='GpuMultiToken.*:*GpuMultiTokenGrid*:GpuCases*:GpuPlan.*' bash bench/gpu/run_h200.sh build,test
wait
tail -2 $OUT/build-base.log
mv $OUT/info.log $OUT/info-1.log
TQ_BUDGET_S=150 TQ_COMPARE_ROUNDS=2 TQ_BASELINE_BENCH=$BASE/build-base/bench/gpu/bench_gpu \
  TQ_COMPARE_ARGS="--mode fast --layout both --shape 8x8192,16x32768 --q-len 16,128 --no-expanded" \
  TQ_SAN_FILTER='GpuMultiToken.Wide*:GpuMultiToken.TheGrid*:*GpuMultiTokenGrid*/2*' \
  bash bench/gpu/run_h200.sh compare,memcheck,racecheck
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
(cd "$OUT" && rm -f 00-all.tgz && tar czf /tmp/tq-all.tgz . && mv /tmp/tq-all.tgz "$OUT/00-all.tgz")
