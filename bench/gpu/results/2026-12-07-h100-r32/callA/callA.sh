#!/bin/bash
# Call A (session 36): branch wip-wide-interleave (the wide kernel's softmax interleaved with
# the next step's dequantization) against main's wide kernel (devrun/base-files), same host:
# test_gpu of the branch; bench_gpu wide rows of both builds interleaved (compare); multi and
# targets of the branch; bench (issue 12's rows) and the CPU targets on the host.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callA.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
BASE=/tmp/tq-base; rm -rf $BASE; mkdir -p $BASE
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./devrun --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $BASE -xf -
cp -r devrun/base-files/. $BASE/
( cd $BASE && cmake -S . -B build-base -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_BENCH=ON -DTURBOQUANT_ENABLE_TOOLS=OFF -DTURBOQUANT_ENABLE_TESTS=OFF \
    > $OUT/build-base.log 2>&1 && cmake --build build-base --target bench_gpu -j8 >> $OUT/build-base.log 2>&1
  echo "base build rc=$? at $SECONDS s" >> $OUT/build-base.log ) &
TQ_CPU_ROUNDS=0 TQ_BUDGET_S=330 bash bench/gpu/run_h200.sh build,test,cputargets  # builds bench_cpu; no rounds yet (the base build runs)
wait
tail -2 $OUT/build-base.log
mv $OUT/info.log $OUT/info-1.log
TQ_BUDGET_S=230 TQ_COMPARE_ROUNDS=2 TQ_BASELINE_BENCH=$BASE/build-base/bench/gpu/bench_gpu \
  TQ_COMPARE_ARGS="--mode fast --layout both --shape 8x8192,16x32768 --q-len 1,16,128 --no-expanded" \
  TQ_BENCH_ARGS="--shape 1x4096,8x8192,32x8192,16x32768" \
  bash bench/gpu/run_h200.sh compare,multi,bench,cputargets
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
