#!/usr/bin/env bash
# Session 32: issue 14's fresh-venv install on an H200 only (what the device time left allows).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
[[ $name == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
OUT=$OUT/h200 TQ_BUDGET_S=200 bash bench/gpu/run_h200.sh venv
