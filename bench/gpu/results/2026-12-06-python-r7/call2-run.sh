#!/usr/bin/env bash
# One-off: the session's starting package (f4585b2's python/) against the working tree's, same host.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p "$OUT"
source .gpu-deps/setup.sh > "$OUT/setup.log" 2>&1
PY=$(command -v python3)
OLD=/tmp/old
rm -rf $OLD && mkdir -p $OLD && tar -cf - --exclude=./build* --exclude=./.old-python . | tar -C $OLD -xf -
rm -rf $OLD/python && cp -r .old-python/tree $OLD/python
cfg="-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=ON -DTURBOQUANT_ENABLE_PYTHON=ON -DTURBOQUANT_ENABLE_TESTS=OFF -DPython_EXECUTABLE=$PY"
(cmake -S . -B build-py-gpu $cfg > "$OUT/build-new.log" 2>&1 && cmake --build build-py-gpu -j8 --target _turboquant tq >> "$OUT/build-new.log" 2>&1; echo "new build rc=$?") &
(cd $OLD && cmake -S . -B build-py-gpu $cfg > "$OUT/build-old.log" 2>&1 && cmake --build build-py-gpu -j8 --target _turboquant >> "$OUT/build-old.log" 2>&1; echo "old build rc=$?") &
wait
echo "== built at $SECONDS s"
for i in 1 2 3 4; do
  for mode in new old capsule; do
    echo "-- process $i, $mode"
    case $mode in
      new) (cd python/bench && PYTHONPATH=../../build-py-gpu/python timeout 60 "$PY" -c "import bench_python as b; b.overhead(1000)") ;;
      capsule) (cd python/bench && TQ_PY_NO_EXCHANGE=1 PYTHONPATH=../../build-py-gpu/python timeout 60 "$PY" -c "import bench_python as b; b.overhead(1000)") ;;
      old) (cd $OLD/python/bench && PYTHONPATH=../../build-py-gpu/python timeout 60 "$PY" -c "import bench_python as b; b.overhead(1000)") ;;
    esac
  done
done 2>&1 | tee "$OUT/overhead.log" | grep -E "^--|overhead 1x4096|route"
echo "== overhead done at $SECONDS s"
PYTHONPATH=build-py-gpu/python TQ_BIN=build-py-gpu/tools/tq/tq timeout 200 "$PY" -m pytest python/tests -q -p no:cacheprovider -x > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest.log"
