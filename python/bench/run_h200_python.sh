#!/usr/bin/env bash
# The Python package on the GPU machine, logs to $OUT: build the extension (CUDA),
# pytest (CPU and CUDA tests), bench_gpu + bench_python.py (docs/PERFORMANCE.md),
# and a fresh-venv `pip install .` with the CUDA backend (offline: no build isolation).
#   bash python/bench/run_h200_python.sh [steps]   steps: build,gtest,pytest,overhead,bench,probe,pip
#   (default build,pytest,bench,pip; gtest builds and runs test_gpu and test_cpu too:
#   the CUDA kernels against the golden model, the CPU ISAs on this host's AVX-512)
set -u
steps=${1:-build,pytest,bench,pip}
has() { [[ ",$steps," == *",$1,"* ]]; }
OUT=${OUT:-/tmp/tq-out}
mkdir -p "$OUT"
source .gpu-deps/setup.sh > "$OUT/setup.log" 2>&1
B=build-py-gpu
PY=$(command -v python3)
log() { echo "== [$SECONDS s] $*" | tee -a "$OUT/info.log"; }
if has build; then
  log build
  cmake -S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=ON \
    -DTURBOQUANT_ENABLE_PYTHON=ON -DPython_EXECUTABLE="$PY" -DTURBOQUANT_ENABLE_TESTS=$(has gtest && echo ON || echo OFF) \
    > "$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 --target _turboquant tq bench_gpu $(has gtest && echo test_gpu test_cpu) >> "$OUT/build.log" 2>&1
  log "build rc=$?"; tail -3 "$OUT/build.log"
fi
if has gtest; then
  log gtest
  timeout 200 $B/tests/test_gpu > "$OUT/test_gpu.log" 2>&1
  log "test_gpu rc=$?"; tail -4 "$OUT/test_gpu.log"
  timeout 150 $B/tests/test_cpu --gtest_brief=1 > "$OUT/test_cpu.log" 2>&1
  log "test_cpu rc=$?"; tail -4 "$OUT/test_cpu.log"
fi
if has pytest; then
  log pytest
  PYTHONPATH=$B/python TQ_BIN=$B/tools/tq/tq timeout 240 "$PY" -m pytest python/tests -q -p no:cacheprovider -rs \
    > "$OUT/pytest.log" 2>&1
  log "pytest rc=$?"; tail -15 "$OUT/pytest.log"
fi
if has overhead; then
  log overhead
  # Processes alternate between tensors borrowed through torch's DLPack exchange table
  # (the package's way where torch publishes one) and DLPack capsules (TQ_PY_NO_EXCHANGE=1,
  # the way before), so both see the same host.
  for i in 1 2 3; do
    for mode in borrowed capsules; do
      echo "-- process $i, $mode"
      (cd python/bench && PYTHONPATH=../../$B/python $( [ $mode = capsules ] && echo env TQ_PY_NO_EXCHANGE=1 ) \
        timeout 60 "$PY" -c "import bench_python as b; b.overhead(1000)")
    done
  done > "$OUT/overhead.log" 2>&1
  log "overhead rc=$?"; cat "$OUT/overhead.log"
fi
# bench_gpu's rows bench_python compares with: bench_gpu_rows NAME (NAME.csv, NAME.log in $OUT)
bench_gpu_rows() {
  timeout 120 $B/bench/gpu/bench_gpu --mode fast --preset 4bit_nc --shape 16x32768,1x4096 --layout soa --sustained \
    --csv "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
}
if has bench; then
  log bench
  bench_gpu_rows bench_gpu
  log "bench_gpu rc=$?"; cat "$OUT/bench_gpu.log" | head -20
  PYTHONPATH=$B/python timeout 180 "$PY" python/bench/bench_python.py --bench-gpu-csv "$OUT/bench_gpu.csv" \
    > "$OUT/bench_python.log" 2>&1
  log "bench_python rc=$?"; cat "$OUT/bench_python.log"
  # bench_gpu again after the Python process: how much of a difference between the
  # two processes is the GPU's state (clocks, temperature) at the time it ran.
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$OUT/info.log" 2>&1
  bench_gpu_rows bench_gpu_after
  log "bench_gpu (after bench_python) rc=$?"; grep -E "^decode" "$OUT/bench_gpu_after.log"
fi
if has probe; then  # probe_harness.py's host timing of eager calls (PERFORMANCE.md, Python run 5)
  log probe
  (cd python/bench && PYTHONPATH=../../$B/python timeout 120 "$PY" probe_harness.py host) > "$OUT/probe.log" 2>&1
  log "probe rc=$?"; cat "$OUT/probe.log"
fi
if has pip; then
  log pip
  TQ_PIP_OFFLINE=1 TQ_PIP_CUDA=ON timeout 300 bash tests/python/pip_install_fresh_venv.sh "$PWD" /tmp/tq-pip "$PY" \
    > "$OUT/pip.log" 2>&1
  log "pip rc=$?"; tail -20 "$OUT/pip.log"
fi
