#!/usr/bin/env bash
# Session 32's second device call: issue 14's H200 runs if an H200 came, else the wide kernel's
# three-block instance against the two-block one on the H100.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
root=$OUT
if [[ $name == *H200* ]]; then
  OUT=$root/h200 TQ_BUDGET_S=575 bash bench/gpu/run_h200.sh build,pytest,venv
else
  OUT=$root/w3 TQ_BUDGET_S=560 TQ_TEST_FILTER='GpuMultiToken.*:GpuPlan.*:GpuFastAos.*' TQ_COMPARE_ROUNDS=2 \
    TQ_AB_ARGS="--mode fast --shape 8x8192,16x32768 --q-len 1,16,128 --layout both --no-expanded" \
    TQ_AB_ENV=TQ_WIDE_BLOCKS=3 TQ_SAN_FILTER='GpuMultiToken.WideInstances*' \
    bash bench/gpu/run_h200.sh build,test,envab,memcheck,racecheck
fi
