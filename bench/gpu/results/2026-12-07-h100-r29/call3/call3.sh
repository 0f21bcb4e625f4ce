#!/usr/bin/env bash
# Session 33's third device call: the final code (fused heads merged): test_gpu, the issues' targets
# (bench, multi, dequantize), pytest, the fresh-venv pip install (issue 14), memcheck on the fused tests.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
OUT=$OUT/final TQ_BUDGET_S=580 TQ_BENCH_ARGS="--shape 1x4096,32x8192,16x32768" \
  TQ_SAN_FILTER='GpuFastAos.Fused*:GpuFastAos.PlansFused*' \
  bash bench/gpu/run_h200.sh build,test,bench,multi,dequantize,pytest,venv,memcheck
