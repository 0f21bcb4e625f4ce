#!/usr/bin/env bash
# Session 34's first device call: main at 182ccb5 (fused AoS heads at every head_dim):
# the whole test_gpu, the issues' targets (bench, multi, dequantize), pytest and the
# fresh-venv pip install (issue 14).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name" | tee "$OUT/gpu.txt"
OUT=$OUT/final TQ_BUDGET_S=585 TQ_BENCH_ARGS="--shape 1x4096,32x8192,16x32768" \
  bash bench/gpu/run_h200.sh build,test,bench,multi,dequantize,pytest,venv
tail -30 "$OUT/final/info.log"
