#!/usr/bin/env bash
# Session 32's fourth device call: issue 14's H200 runs if an H200 came, else (H100) pacing the
# two-column-tile AoS instances (devrun/pace2.patch) against no pacing.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
root=$OUT
if [[ $name == *H200* ]]; then
  OUT=$root/h200 TQ_BUDGET_S=575 bash bench/gpu/run_h200.sh build,pytest,venv
else
  mkdir -p /tmp/pace && tar --exclude=./build-gpu -cf - . | tar -xf - -C /tmp/pace
  cd /tmp/pace && patch -p1 < devrun/pace2.patch > $root/patch.log 2>&1 || { echo "patch failed"; cat $root/patch.log; exit 1; }
  OUT=$root/pace2 TQ_BUDGET_S=300 TQ_COMPARE_ROUNDS=3 \
    TQ_AB_ARGS="--mode fast --preset 4bit_nc --shape 32x8192,16x32768 --q-len 1,4 --layout both --no-expanded" \
    TQ_AB_ENV=TQ_FAST_CLUSTER=1 bash bench/gpu/run_h200.sh build,envab
fi
