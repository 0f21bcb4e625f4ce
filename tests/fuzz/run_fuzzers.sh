#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, the whole library
# instrumented for coverage) and runs each for SECONDS (default 60).
#
#   tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]     targets: npy case_dir decode decode_rows encode
#
# The committed corpus (tests/fuzz/corpus/<target>) seeds each run; new inputs go
# to $BUILD_DIR/fuzz-work/<target>/new, crashes to .../artifacts. MERGE=1 then
# adds to the committed corpus only the new inputs that reach new coverage
# edges (-merge=1 -use_counters=0: keeps the corpus small). JOBS=N runs N
# fuzzing processes per target (default 1).
# Logs, with libFuzzer's final stats (execs, coverage, corpus), land in
# $BUILD_DIR/fuzz-work/<target>/log; a summary line per target is printed.
set -euo pipefail
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(npy case_dir decode decode_rows encode)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-1}
clangxx=${CLANGXX:-clang++}
if ! command -v "$clangxx" >/dev/null; then
  echo "run_fuzzers.sh: $clangxx not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi

mkdir -p "$build"
CXX=$clangxx cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTURBOQUANT_ENABLE_FUZZ=ON -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_BENCH=OFF \
  -DTURBOQUANT_ENABLE_TOOLS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  corpus="$root/tests/fuzz/corpus/$t"
  mkdir -p "$work/new" "$work/artifacts" "$corpus"
  start=$(date +%s)
  set +e
  extra=()
  [ "$jobs" -gt 1 ] && extra=(-jobs="$jobs" -workers="$jobs")
  (cd "$work" && rm -f fuzz-*.log && "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
    -rss_limit_mb=4096 -timeout=20 -max_len=65536 -artifact_prefix="$work/artifacts/" "${extra[@]}" \
    "$work/new" "$corpus" >"$work/log" 2>&1)
  rc=$?
  set -e
  if [ "$jobs" -gt 1 ]; then cat "$work"/fuzz-*.log >>"$work/log" 2>/dev/null || true; fi
  execs=$(grep -h 'stat::number_of_executed_units' "$work/log" | awk '{s+=$2} END {print s+0}')
  cov=$(grep -ho 'cov: [0-9]*' "$work/log" | tail -1 | awk '{print $2}')
  ft=$(grep -ho 'ft: [0-9]*' "$work/log" | tail -1 | awk '{print $2}')
  found=$(ls "$work/artifacts" | wc -l)
  echo "fuzz_$t: ${secs}s (wall $(( $(date +%s) - start ))s), exit $rc, execs $execs, cov $cov, ft $ft," \
       "new inputs $(ls "$work/new" | wc -l), committed corpus $(ls "$corpus" | wc -l), artifacts $found"
  [ "$rc" -ne 0 ] && { status=1; tail -40 "$work/log"; }
  if [ "${MERGE:-0}" = 1 ]; then
    "$build/tests/fuzz/fuzz_$t" -merge=1 -use_counters=0 -max_len=65536 "$corpus" "$work/new" >"$work/merge.log" 2>&1
    echo "  merged: committed corpus now $(ls "$corpus" | wc -l) files, $(du -sk "$corpus" | cut -f1) KiB"
  fi
done
exit $status
