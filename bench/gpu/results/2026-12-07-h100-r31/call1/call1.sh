#!/bin/bash
# Call 1 (session 35): spill-fix (epilogue if + block-uniform column mask) against main's
# fast decode headers, same host: test_gpu of this tree; bench_gpu fast multi-token rows
# of both builds interleaved (compare); multi and targets of this tree.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
BASE=/tmp/tq-base; rm -rf $BASE; mkdir -p $BASE
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./devrun --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $BASE -xf -
cp -r devrun/base-files/. $BASE/
( cd $BASE && cmake -S . -B build-base -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_BENCH=ON -DTURBOQUANT_ENABLE_TOOLS=OFF -DTURBOQUANT_ENABLE_TESTS=OFF \
    > $OUT/build-base.log 2>&1 && cmake --build build-base --target bench_gpu -j8 >> $OUT/build-base.log 2>&1
  echo "base build rc=$? at $SECONDS s" >> $OUT/build-base.log ) &
TQ_BUDGET_S=250 bash bench/gpu/run_h200.sh build,test
wait
tail -2 $OUT/build-base.log
mv $OUT/info.log $OUT/info-1.log
TQ_BUDGET_S=200 TQ_COMPARE_ROUNDS=3 TQ_BASELINE_BENCH=$BASE/build-base/bench/gpu/bench_gpu \
  TQ_COMPARE_ARGS="--mode fast --layout both --shape 1x4096,8x8192,16x32768 --q-len 1,2,4,8,16 --no-expanded" \
  bash bench/gpu/run_h200.sh compare,multi
