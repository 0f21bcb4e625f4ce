#!/usr/bin/env bash
# Session 33's second device call: fused heads for one and two column tiles (wip-fused-heads):
# test_gpu, an A/B against one KV head a block (TQ_FAST_FUSED=off) at q_len 1, 2, 4, the issues'
# targets (multi, bench, dequantize), pytest, and the sanitizers on the fused tests.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
OUT=$OUT/fused2 TQ_BUDGET_S=575 TQ_COMPARE_ROUNDS=2 \
  TQ_AB_ARGS="--mode fast --layout both --shape 32x8192,16x32768 --q-len 1,4 --no-expanded" \
  TQ_AB_ENV=TQ_FAST_FUSED=off TQ_SAN_FILTER='GpuFastAos.Fused*:GpuFastAos.PlansFused*' \
  TQ_BENCH_ARGS="--shape 1x4096,32x8192,16x32768" \
  bash bench/gpu/run_h200.sh build,test,envab,multi,bench,dequantize,pytest,memcheck,racecheck
