#!/usr/bin/env bash
# Session 32's last device call: issue 14's H200 pytest run, only on an H200.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
[[ $name == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
OUT=$OUT/h200 TQ_BUDGET_S=240 bash bench/gpu/run_h200.sh build,pytest
