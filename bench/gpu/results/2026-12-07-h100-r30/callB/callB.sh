#!/usr/bin/env bash
# Session 34's second device call (the warm machine of call A, its build-gpu): fused
# against one KV head a block at head_dims 64 and 256 (q 1 and q 4, both layouts, 2
# interleaved rounds), then memcheck and racecheck on the fused-heads tests.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name" | tee "$OUT/gpu.txt"
for d in 64 256; do
  mkdir -p "$OUT/d$d"
  OUT=$OUT/d$d TQ_BUDGET_S=170 TQ_COMPARE_ROUNDS=2 TQ_AB_ENV=TQ_FAST_FUSED=off \
    TQ_AB_ARGS="--mode fast --layout both --shape 1x4096,32x8192,16x32768 --q-len 1,4 --no-expanded --head-dim $d" \
    bash bench/gpu/run_h200.sh envab
done
mkdir -p "$OUT/san"
OUT=$OUT/san TQ_BUDGET_S=230 TQ_SAN_FILTER='GpuFastAos.Fused*:GpuFastAos.PlansFused*' \
  bash bench/gpu/run_h200.sh memcheck,racecheck
grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY\|PASSED\|FAILED' "$OUT"/san/*.log
