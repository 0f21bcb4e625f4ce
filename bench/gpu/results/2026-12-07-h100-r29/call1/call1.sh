#!/usr/bin/env bash
# Session 33's first device call: the fused-heads branch (wip-fused-heads): test_gpu, an A/B of fused
# heads against one KV head a block (TQ_FAST_FUSED=off: the paced plan on an H100), sanitizers on the new tests.
# On an H200, issue 14's pytest and venv steps too.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
root=$OUT
steps=build,test,envab,memcheck,racecheck
budget=560
if [[ $name == *H200* ]]; then steps=build,test,pytest,venv,envab,memcheck; fi
OUT=$root/fused TQ_BUDGET_S=$budget TQ_COMPARE_ROUNDS=2 \
  TQ_AB_ARGS="--mode fast --layout both --shape 1x4096,32x8192,16x32768 --q-len 1,2 --no-expanded" \
  TQ_AB_ENV=TQ_FAST_FUSED=off TQ_SAN_FILTER='GpuFastAos.Fused*:GpuFastAos.PlansFused*' \
  bash bench/gpu/run_h200.sh $steps
