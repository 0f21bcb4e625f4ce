#!/usr/bin/env bash
# Session 33's fourth device call: the fast AoS tests after the fix of the plan test's k3v4_nc case.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
OUT=$OUT/fix TQ_BUDGET_S=250 TQ_TEST_FILTER='GpuFastAos.*' bash bench/gpu/run_h200.sh build,test
