#!/usr/bin/env bash
# Session 34's last device call: main with the fused plan's tokens-a-warp rule
# (fast_fused_pays_off): the whole test_gpu, the fast rows of every preset and shape, the
# multi-token rows (the AoS regressions of round 29 at 1 x 4096 and 8 x 8192), and the
# head_dim 64 and 256 rows whose fused plans lost in call B; pytest (the package on the final kernels).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name" | tee "$OUT/gpu.txt"
OUT=$OUT/final TQ_BUDGET_S=370 TQ_BENCH_ARGS="--mode fast --shape 1x4096,8x8192,32x8192,16x32768" \
  bash bench/gpu/run_h200.sh build,test,bench,multi,pytest
B=build-gpu
for d in 64 256; do
  timeout 60 $B/bench/gpu/bench_gpu --mode fast --layout both --shape 1x4096,8x8192,32x8192,16x32768 --q-len 1,4 \
    --no-expanded --head-dim $d --csv "$OUT/final/d$d.csv" > "$OUT/final/d$d.log" 2>&1
  grep 'aos/soa' "$OUT/final/d$d.log" | grep -v expanded
done
grep -E '^\[  (PASSED|FAILED)|FAILED  \]' "$OUT/final/test.log" | head
