#!/usr/bin/env bash
# Session 32's third device call: issue 14's H200 runs if an H200 came, else main's final code on the H100:
# test_gpu, pytest, and the benchmarks behind the issues' targets.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
root=$OUT
if [[ $name == *H200* ]]; then
  OUT=$root/h200 TQ_BUDGET_S=575 bash bench/gpu/run_h200.sh build,pytest,venv
else
  OUT=$root/final TQ_BUDGET_S=560 TQ_BENCH_ARGS="--shape 1x4096,32x8192,16x32768" \
    bash bench/gpu/run_h200.sh build,test,pytest,multi,bench,dequantize
fi
