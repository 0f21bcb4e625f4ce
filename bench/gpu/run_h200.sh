#!/usr/bin/env bash
# One full device session: build, tests, benchmarks, sanitizers; logs to $OUT.
#   bash bench/gpu/run_h200.sh [steps]   steps: comma list of
#   build,test,ctest,pytest,venv,bench,multi,dequantize,cpu,cputargets,compare,envab,ncudeq,wide,loader,ncuwide,ncusrc,ncustrict,dram,sdpa,memcheck,racecheck,initcheck,
#   synccheck,sass,ncu (default: build,test,bench,sdpa and the four sanitizers)
#   pytest    the Python package's tests (CPU and CUDA; the build step then builds the
#             extension and tq in the same build directory)
#   venv      `pip install .` of this tree into a fresh virtual environment with the CUDA
#             backend (no build isolation: the machine is offline), docs/PYTHON.md's five
#             lines and a decode of torch CUDA tensors with the installed package
#             (tests/python/pip_install_fresh_venv.sh; about 150 s on 16 cores)
#   ctest     the whole suite (CPU, tool, reliability and GPU tests; the cross-backend
#             tests then include the CUDA backends); builds every target
#   multi     bench_gpu --q-len: multi-token rows against single-token rows (multi.csv, the
#             targets') and then also against expanded rows (multi-expanded.csv) (4bit_nc, fast
#             mode, 1x4096, 8x8192, 16x32768; PERFORMANCE.md rounds 8 and 31)
#   dequantize  bench_gpu --mode dequantize (cuda::dequantize_sequences)
#   cpu       test_cpu's multi-token, rows and cross-backend tests (this host's ISA, AVX-512
#             on the H200 host; ReferenceMultiToken runs the CUDA backends too) and
#             bench_cpu's decode-multi rows at 2 threads (taskset of 2 cores)
#   cputargets  the issues' CPU targets on this host (bench_cpu's AoS / SoA and q 4 / q 1 rows at
#             1 x 32768, 2 threads, TQ_CPU_ROUNDS processes interleaved at random; into targets.log)
#   compare   bench_gpu of $TQ_BASELINE_BENCH (a binary of an earlier commit, carried)
#             and of this tree, interleaved TQ_COMPARE_ROUNDS times (default 3), then
#             bench/gpu/compare_bench.py (exit 1 if a ratio exceeds 1.02)
#   envab     bench_gpu $TQ_AB_ARGS (default --mode strict --layout both --shape
#             1x4096,32x8192,16x32768) as is (the baseline) and under the environment
#             $TQ_AB_ENV (default TQ_STRICT_SHIFT=per-row), interleaved TQ_COMPARE_ROUNDS
#             times (default 3), then compare_bench.py (current: under TQ_AB_ENV)
#   ncudeq    ncu (speed of light, occupancy, warp states, stall reasons, source counters) of the
#             dequantize's fp16 original-basis kernel at 16x32768 for each TQ_NCU_DEQ_CASES
#             entry (default 3bit_nc:soa 4bit_nc:aos; preset:layout)
#   wide      bench_gpu --q-len TQ_WIDE_Q_LENS (default 1,4,8,16,128; 4bit_nc, fast, TQ_WIDE_SHAPES,
#             default 1x4096,8x8192,16x32768) with the plan's choice, with the wide
#             kernel wherever it applies (TQ_FAST_WIDE=force) and never (=off), interleaved TQ_COMPARE_ROUNDS
#             times (default 2)
#   loader    bench_gpu --mode fast --layout both (TQ_LOADER_SHAPES, default 1x4096,32x8192,16x32768)
#             with tensor copies (the default) and with TQ_FAST_LOADER=cp.async,
#             interleaved TQ_COMPARE_ROUNDS times (default 3)
#   ncuwide   ncu of the first multi-token fast kernel (wide or not), 4bit_nc, SoA, at
#             TQ_NCU_WIDE_CASES (default 1x4096:16 1x4096:128 1x32768:128; shape:q_len[:policy],
#             policy the TQ_FAST_WIDE value, default force)
#   ncusrc    ncu's source counters (per CUDA line and per SASS instruction, CSV) of the kernel of
#             TQ_NCU_SRC_CASE (default 1x4096:16; shape:q_len[:policy], as ncuwide); build with
#             TQ_CUDA_FLAGS=-lineinfo for the CUDA lines
#   pace      bench_gpu --mode fast (TQ_PACE_MODES: also strict) of SoA, then of AoS under each
#             TQ_PACE_CONFIGS entry (cluster:pace_tiles:force: TQ_FAST_CLUSTER, TQ_FAST_PACE,
#             TQ_FAST_CLUSTER_FORCE), interleaved TQ_COMPARE_ROUNDS times (default 3; shapes
#             TQ_PACE_SHAPES; table: pace_table.py)
#   ncustrict ncu's source counters (per SASS instruction, CSV) and warp states of one strict decode,
#             SoA and AoS, TQ_NCU_STRICT_CASE (default 4bit_nc:32x8192)
#   dram      ncu's DRAM and L2 bytes of the fast decode, 16x32768, SoA and AoS (under each
#             TQ_DRAM_CONFIGS pacing), 4bit_nc and k8v4 (dram.log; PERFORMANCE.md rounds 14 and 20)
#   (after the steps: bench/gpu/targets.py on the bench, multi and dequantize CSVs of the run,
#   the issues' speed targets, into targets.log; its summary also into info.log)
#   TQ_CUDA_ARCH     CMAKE_CUDA_ARCHITECTURES of the build (default 90a: the wide kernel's wgmma;
#                    90 builds it with mma.sync)
#   TQ_TEST_FILTER   gtest filter of the test step (default: all of test_gpu)
#   TQ_SAN_FILTER    gtest filter of the four sanitizer steps (default: the kernels' own tests below)
#   TQ_CPU_BENCH_FILTER  bench_cpu filter of the cpu step (default decode-multi/.*/t2/)
#   TQ_BENCH_ARGS    extra bench_gpu arguments of the bench step (e.g. --mode fast
#                    --shape 1x4096,32x8192,16x32768; both layouts by default)
#   TQ_COMPARE_ARGS  extra arguments of both binaries in the compare step (older
#                    binaries know --quick, --preset, --shape BxS and --mode; the
#                    current one is run with --layout soa, the layout they measure,
#                    unless the arguments name a --layout for both)
# Stops starting new steps when less than TQ_RESERVE_S seconds of the
# TQ_BUDGET_S budget remain (the device command limit is 600 s).
set -u
steps=${1:-build,test,bench,sdpa,memcheck,racecheck,initcheck,synccheck}
OUT=${OUT:-/tmp/tq-out}
mkdir -p "$OUT"
budget=${TQ_BUDGET_S:-570}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
has() { [[ ",$steps," == *",$1,"* ]]; }
log() { echo "== [$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/info.log"; }
run_step() {  # name seconds cmd...
  local name=$1 secs=$2; shift 2
  local l; l=$(left)
  if (( l < 20 )); then log "skip $name (only ${l}s left)"; return 0; fi
  (( secs > l - 10 )) && secs=$((l - 10))
  log "start $name (limit ${secs}s)"
  timeout -k 5 "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  log "end $name rc=$rc"
  tail -n 40 "$OUT/$name.log"
  return $rc
}

source .gpu-deps/setup.sh > "$OUT/info.log" 2>&1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nproc; } >> "$OUT/info.log" 2>&1
B=${TQ_BUILD_DIR:-build-gpu}  # TQ_BUILD_DIR: a build made by another script (e.g. python/bench/run_h200_python.sh)
build() {
  local cfg=(-S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=${TQ_CUDA_ARCH:-90a} -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=ON
             "-DCMAKE_CUDA_FLAGS=${TQ_CUDA_FLAGS:-}")
  local tools=OFF
  [[ ",$steps," == *",ctest,"* || ",$steps," == *",pytest,"* ]] && tools=ON
  [[ ",$steps," == *",pytest,"* ]] && cfg+=(-DTURBOQUANT_ENABLE_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)")
  if ! cmake "${cfg[@]}" -DTURBOQUANT_ENABLE_BENCH=ON -DTURBOQUANT_ENABLE_TOOLS=$tools; then
    echo "configure with benchmarks failed; retrying without (bench_gpu built by hand)"
    cmake "${cfg[@]}" -DTURBOQUANT_ENABLE_BENCH=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF || return 1
  fi
  local targets=test_gpu
  [[ ",$steps," == *",cpu,"* ]] && targets="test_gpu test_cpu bench_cpu"
  [[ ",$steps," == *",cputargets,"* && ",$steps," != *",cpu,"* ]] && targets+=" bench_cpu"
  [[ ",$steps," == *",pytest,"* ]] && targets+=" _turboquant tq"
  if [[ ",$steps," == *",ctest,"* ]]; then cmake --build $B -j16 || return 1; else cmake --build $B --target $targets -j16 || return 1; fi
  if cmake --build $B --target help | grep -q bench_gpu; then
    cmake --build $B --target bench_gpu -j16 || return 1
  else
    mkdir -p $B/bench/gpu
    nvcc -std=c++20 -O3 -arch=sm_${TQ_CUDA_ARCH:-90a} -Icore/include -Iinclude bench/gpu/bench_gpu.cu \
      $B/gpu/libturboquant_cuda.a $B/src/libturboquant_core.a -o $B/bench/gpu/bench_gpu || return 1
  fi
}
# The issues' CPU targets on this host (AoS / SoA and q 4 / q 1 at 1 x 32768, 2 threads):
# TQ_CPU_ROUNDS processes (default 3) of their rows, repetitions interleaved at random (the
# method of PERFORMANCE.md's CPU targets: SoA and AoS see the same noise), read by targets.py.
cputargets() {
  local isa i
  isa=$(grep -qw avx512bw /proc/cpuinfo && echo avx512 || echo avx2)
  for ((i = 1; i <= ${TQ_CPU_ROUNDS:-3}; ++i)); do
    taskset -c 0,1 $B/bench/cpu/bench_cpu --benchmark_min_time=0.2 --benchmark_repetitions=5 \
      --benchmark_enable_random_interleaving=true --benchmark_format=json \
      --benchmark_filter="^(decode(-aos)?/[^/]+/B1x32768/t2/$isa|decode-multi/4bit_nc/B1x32768/q(1|4)/t2/$isa/(single|rows))" \
      > "$OUT/cputargets-$i.json" || return 1
  done
}
compare() {
  local rounds=${TQ_COMPARE_ROUNDS:-3} i layout=(--layout soa)
  [[ " ${TQ_COMPARE_ARGS:-} " == *" --layout "* ]] && layout=()
  for ((i = 1; i <= rounds; ++i)); do
    # Both arms allocate per row (binaries before 2026-12-06 know no other way).
    TQ_BENCH_FRESH_BUFFERS=1 "$TQ_BASELINE_BENCH" ${TQ_COMPARE_ARGS:-} --csv "$OUT/compare-baseline-$i.csv" > /dev/null || return 1
    TQ_BENCH_FRESH_BUFFERS=1 $B/bench/gpu/bench_gpu ${TQ_COMPARE_ARGS:-} "${layout[@]}" --csv "$OUT/compare-current-$i.csv" > /dev/null || return 1
  done
  python3 bench/gpu/compare_bench.py --baseline "$OUT"/compare-baseline-*.csv --current "$OUT"/compare-current-*.csv
}
envab() {
  local rounds=${TQ_COMPARE_ROUNDS:-3} i
  local args=(${TQ_AB_ARGS:---mode strict --layout both --shape 1x4096,32x8192,16x32768})
  for ((i = 1; i <= rounds; ++i)); do
    $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/envab-as-is-$i.csv" > /dev/null || return 1
    env ${TQ_AB_ENV:-TQ_STRICT_SHIFT=per-row} $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/envab-env-$i.csv" > /dev/null || return 1
  done
  python3 bench/gpu/compare_bench.py --limit 100 --baseline "$OUT"/envab-as-is-*.csv --current "$OUT"/envab-env-*.csv
}
ncudeq() {
  local sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats"
  sections+=" --section MemoryWorkloadAnalysis --section SourceCounters"
  sections+=" --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
  local case preset layout
  for case in ${TQ_NCU_DEQ_CASES:-3bit_nc:soa 4bit_nc:aos}; do
    IFS=: read -r preset layout <<< "$case"
    echo "== $preset $layout fp16 original 16x32768"
    # bench_gpu --reps 1 launches a row 5 times (call, 3 warm-ups, 1 timed): skip fp16 rotated's
    ncu --clock-control none -k regex:dequantize_kernel --launch-skip 5 --launch-count 1 $sections \
      $B/bench/gpu/bench_gpu --reps 1 --mode dequantize --preset $preset --shape 16x32768 --layout $layout || return 1
  done
}
wide() {
  local rounds=${TQ_COMPARE_ROUNDS:-2} i args=(--mode fast --preset 4bit_nc --shape ${TQ_WIDE_SHAPES:-1x4096,8x8192,16x32768} --q-len ${TQ_WIDE_Q_LENS:-1,4,8,16,128})
  for ((i = 1; i <= rounds; ++i)); do
    $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/wide-on-$i.csv" || return 1
    TQ_FAST_WIDE=off $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/wide-off-$i.csv" || return 1
    TQ_FAST_WIDE=force $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/wide-force-$i.csv" || return 1
  done
}
loader() {
  local rounds=${TQ_COMPARE_ROUNDS:-3} i args=(--mode fast --layout both --shape "${TQ_LOADER_SHAPES:-1x4096,32x8192,16x32768}")
  for ((i = 1; i <= rounds; ++i)); do
    $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/loader-tensor-$i.csv" || return 1
    TQ_FAST_LOADER=cp.async $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/loader-cpasync-$i.csv" || return 1
  done
}
pace() {
  local rounds=${TQ_COMPARE_ROUNDS:-3} i cfg c t f mode configs shapes=(--shape "${TQ_PACE_SHAPES:-1x4096,32x8192,16x32768}")
  for ((i = 1; i <= rounds; ++i)); do
    for mode in ${TQ_PACE_MODES:-fast}; do
      $B/bench/gpu/bench_gpu --mode $mode "${shapes[@]}" --layout soa --csv "$OUT/pace-$mode-soa-$i.csv" > /dev/null || return 1
      for cfg in ${TQ_PACE_CONFIGS:-8:1:0 1:1:0 8:1:1 2:1:1}; do
        IFS=: read -r c t f <<< "$cfg"
        TQ_FAST_CLUSTER=$c TQ_FAST_PACE=$t TQ_FAST_CLUSTER_FORCE=$f $B/bench/gpu/bench_gpu \
          --mode $mode "${shapes[@]}" --layout aos --csv "$OUT/pace-$mode-aos-c$c-t$t-f$f-$i.csv" > /dev/null || return 1
      done
    done
  done
}
dram() {
  local m=dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
  local preset cfg c f
  for preset in 4bit_nc k8v4; do
    echo "== $preset soa"
    ncu --clock-control none -k regex:fast_decode --launch-count 1 --metrics $m $B/bench/gpu/bench_gpu --reps 1 \
      --mode fast --preset $preset --shape 16x32768 --layout soa || return 1
    for cfg in ${TQ_DRAM_CONFIGS:-8:0 1:0 8:1 2:1}; do  # max cluster:force (TQ_FAST_CLUSTER, TQ_FAST_CLUSTER_FORCE)
      IFS=: read -r c f <<< "$cfg"
      echo "== $preset aos TQ_FAST_CLUSTER=$c TQ_FAST_CLUSTER_FORCE=$f"
      TQ_FAST_CLUSTER=$c TQ_FAST_CLUSTER_FORCE=$f ncu --clock-control none -k regex:fast_decode --launch-count 1 \
        --metrics $m $B/bench/gpu/bench_gpu --reps 1 --mode fast --preset $preset --shape 16x32768 --layout aos || return 1
    done
  done
}
ncuwide() {
  local sections="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
  sections+=" --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"  # the stall reasons
  local case shape q policy
  for case in ${TQ_NCU_WIDE_CASES:-1x4096:16 1x4096:128 1x32768:128}; do
    IFS=: read -r shape q policy <<< "$case"
    echo "== ${shape} q_len ${q} TQ_FAST_WIDE=${policy:-force}"
    TQ_FAST_WIDE=${policy:-force} ncu --clock-control none -k regex:'wide_decode|fast_decode' --launch-count 1 $sections \
      $B/bench/gpu/bench_gpu --reps 1 --mode fast --preset 4bit_nc --layout soa --shape $shape --q-len $q || return 1
  done
}
ncusrc() {
  local shape q policy
  IFS=: read -r shape q policy <<< "${TQ_NCU_SRC_CASE:-1x4096:16}"
  TQ_FAST_WIDE=${policy:-force} ncu --clock-control none -k regex:'wide_decode|fast_decode' --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source yes -f -o /tmp/tq-ncusrc \
    $B/bench/gpu/bench_gpu --reps 1 --mode fast --preset 4bit_nc --layout soa --shape $shape --q-len $q || return 1
  ncu -i /tmp/tq-ncusrc.ncu-rep --page source --csv --print-source cuda > "$OUT/ncusrc-cuda.csv" || return 1
  ncu -i /tmp/tq-ncusrc.ncu-rep --page source --csv --print-source sass | gzip > "$OUT/ncusrc-sass.csv.gz"
}
ncustrict() {  # ncu source counters of one strict decode launch per layout (TQ_NCU_STRICT_CASE preset:shape)
  local preset shape layout
  IFS=: read -r preset shape <<< "${TQ_NCU_STRICT_CASE:-4bit_nc:32x8192}"
  for layout in soa aos; do
    ncu --clock-control none -k regex:strict_decode --launch-count 1 --section SourceCounters --section WarpStateStats \
      --section SchedulerStats --section SpeedOfLight --section Occupancy -f -o /tmp/tq-ncustrict-$layout \
      $B/bench/gpu/bench_gpu --reps 1 --mode strict --preset $preset --layout $layout --shape $shape || return 1
    ncu -i /tmp/tq-ncustrict-$layout.ncu-rep --page details > "$OUT/ncustrict-$layout-details.txt" || return 1
    ncu -i /tmp/tq-ncustrict-$layout.ncu-rep --page source --csv --print-source sass | gzip > "$OUT/ncustrict-$layout-sass.csv.gz"
  done
}
export -f build cputargets compare envab ncudeq wide loader pace dram ncuwide ncusrc ncustrict
export B OUT steps
has build && { run_step build 300 bash -c build || { log "build failed"; exit 1; }; }
# ptxas serializing a kernel's wgmma (C7514/C7515: an ordinary instruction touching registers
# of a product in flight) costs a wait after every product; none of the kernels should have it.
has build && grep -h "C751[45]" "$OUT/build.log" | sed 's/.*in the function/WARNING wgmma serialized in/' | sort -u | tee -a "$OUT/info.log"
has test && run_step test 200 $B/tests/test_gpu --gtest_color=no --gtest_filter="${TQ_TEST_FILTER:-*}"
has bench && run_step bench 150 $B/bench/gpu/bench_gpu ${TQ_BENCH_ARGS:-} --csv "$OUT/bench.csv"
# The targets' rows without the expanded ones between them (multi.csv), then all rows again with
# them (multi-expanded.csv): timed right after the q 2 expanded row, the same binary's 16 x 32768
# q 4 rows read 5-9% slower than without it (PERFORMANCE.md round 31).
multi() {
  local args=(--mode fast --preset 4bit_nc --shape 1x4096,8x8192,16x32768 --q-len 1,2,4,8,16,128)
  $B/bench/gpu/bench_gpu "${args[@]}" --no-expanded --csv "$OUT/multi.csv" || return 1
  $B/bench/gpu/bench_gpu "${args[@]}" --csv "$OUT/multi-expanded.csv"
}
export -f multi
has multi && run_step multi 160 bash -c multi
has dequantize && run_step dequantize 90 $B/bench/gpu/bench_gpu --mode dequantize --csv "$OUT/dequantize.csv"
has cpu && run_step cpu-test 120 $B/tests/test_cpu --gtest_color=no \
  --gtest_filter='CpuRowsExact*:*CpuMultiTokenGrid*:ReferenceMultiToken*:*MultiToken*'
has cpu && run_step cpu-bench 120 taskset -c 0,1 $B/bench/cpu/bench_cpu --benchmark_filter="${TQ_CPU_BENCH_FILTER:-decode-multi/.*/t2/}" \
  --benchmark_min_time=0.2
has cputargets && run_step cputargets 150 bash -c cputargets
has compare && run_step compare 200 bash -c compare
has envab && run_step envab 200 bash -c envab
has ncudeq && run_step ncudeq 150 bash -c ncudeq
has wide && run_step wide 240 bash -c wide
has loader && run_step loader 240 bash -c loader
has ncuwide && run_step ncuwide 150 bash -c ncuwide
has ncusrc && run_step ncusrc 120 bash -c ncusrc
has pace && run_step pace 240 bash -c pace
has dram && run_step dram 150 bash -c dram
has ncustrict && run_step ncustrict 150 bash -c ncustrict
has ctest && run_step ctest 300 bash -c "cd $B && ctest -j16 --output-on-failure"
has pytest && PYTHONPATH=$B/python TQ_BIN=$B/tools/tq/tq run_step pytest 240 python3 -m pytest python/tests -q -p no:cacheprovider -rs
has venv && TQ_PIP_OFFLINE=1 TQ_PIP_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL=16 run_step venv 300 \
  bash tests/python/pip_install_fresh_venv.sh "$PWD" /tmp/tq-fresh-venv python3
has sdpa && PYTHONUNBUFFERED=1 run_step sdpa 90 python3 bench/gpu/sdpa_baseline.py --csv "$OUT/sdpa.csv"
SAN_FILTER='GpuCases.*:GpuGraph.*:GpuPlan.*:GpuDeviceHelpers.*:GpuFastHelpers.*:GpuDecode.LargeGrid*:GpuDecode.AosLargeGrid*:GpuDecode.AosUniform*:GpuDecode.AosCacheAtAnyEvenOffset*:GpuEncode.*Misaligned*:GpuFastAos.*:GpuDequantize*:GpuMultiToken.*:*GpuMultiTokenGrid*/2*'
SAN_FILTER=${TQ_SAN_FILTER:-$SAN_FILTER}
RACE_FILTER=${TQ_SAN_FILTER:-"GpuMultiToken.*:GpuCases.*:GpuPlan.*:GpuDeviceHelpers.*:GpuDecode.LargeGrid*:GpuDecode.AosLargeGrid*:GpuEncode.*Misaligned*:GpuFastAos.*:GpuDequantize*:*GpuMultiTokenGrid*/2*"}
has memcheck && run_step memcheck 120 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
  $B/tests/test_gpu --gtest_filter="$SAN_FILTER" --gtest_color=no
has racecheck && run_step racecheck 120 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 \
  $B/tests/test_gpu --gtest_filter="$RACE_FILTER" --gtest_color=no
has initcheck && run_step initcheck 150 compute-sanitizer --tool initcheck --error-exitcode 9 \
  $B/tests/test_gpu --gtest_filter="$SAN_FILTER" --gtest_color=no
has synccheck && run_step synccheck 120 compute-sanitizer --tool synccheck --error-exitcode 9 \
  $B/tests/test_gpu --gtest_filter="$SAN_FILTER" --gtest_color=no
if has sass; then  # SASS of the D 128 kernel files (every instance), gzipped, for instruction counts
  o=$B/gpu/CMakeFiles/turboquant_cuda.dir/src
  for f in strict_kernels_d128 strict_kernels_aos_d128 fast_kernels_d128 fast_kernels_tc_d128 dequantize_kernels_d128 encode_kernels; do
    [ -f $o/$f.cu.o ] && cuobjdump -sass $o/$f.cu.o | gzip > "$OUT/$f.sass.gz"
  done
fi
if has ncu; then
  NCU_SECTIONS="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section ComputeWorkloadAnalysis"
  ncu_run() { ncu --clock-control none -k regex:'fast_decode|merge_kernel|strict_decode' --launch-count 2 $NCU_SECTIONS \
      $B/bench/gpu/bench_gpu --reps 1 "$@"; }
  export -f ncu_run; export NCU_SECTIONS
  run_step ncu 200 bash -c 'ncu_run --preset 4bit_nc --shape 16x32768 --mode fast; ncu_run --preset 3bit_nc --shape 16x32768 --mode fast; ncu_run --preset 4bit_nc --shape 1x4096 --mode fast; ncu_run --preset 4bit_nc --shape 16x32768 --mode strict; ncu --clock-control none -k regex:encode_kernel --launch-count 1 $NCU_SECTIONS $B/bench/gpu/bench_gpu --reps 1 --preset 4bit_nc --mode encode'
fi
# The issues' speed targets from this run's CSVs (bench/gpu/targets.py; exit 1 = a target missed).
targets_args=()
[ -f "$OUT/bench.csv" ] && targets_args+=(--bench "$OUT/bench.csv")
[ -f "$OUT/multi.csv" ] && targets_args+=(--multi "$OUT/multi.csv")
[ -f "$OUT/dequantize.csv" ] && targets_args+=(--dequantize "$OUT/dequantize.csv")
cpu_json=()
for f in "$OUT"/cputargets-*.json; do [ -s "$f" ] && cpu_json+=("$f"); done
(( ${#cpu_json[@]} )) && targets_args+=(--cpu "${cpu_json[@]}")
if (( ${#targets_args[@]} )); then
  python3 bench/gpu/targets.py "${targets_args[@]}" > "$OUT/targets.log" 2>&1
  sed -n '/^== summary/,$p' "$OUT/targets.log" | tee -a "$OUT/info.log"
fi
log "done"
# Only a few files come back from a device call: everything, packed, under a name that sorts first.
(cd "$OUT" && tar czf /tmp/tq-all.tgz . && mv /tmp/tq-all.tgz "$OUT/00-all.tgz")
