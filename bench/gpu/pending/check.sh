#!/bin/bash
# The GPU check of the pending patches (README.md here): wide-values.patch (values in the wide
# kernels' V^T) and wide-direct.patch on top of it (the specialized producers' SoA tiles straight
# into registers; wide-native-rule.patch goes into the same build), written in session 38, which
# could not run it (no device was lent). Through the
# device tool's `run`, with carry [".gpu-deps"] and the binaries built here for sm_90a (Release),
# packed as
#   devrun/binsA.tar.xz: bench_gpu of main (the baseline),
#   devrun/binsC.tar.xz: test_gpu and bench_gpu of main + wide-values.patch (every head_dim),
#   devrun/binsE.tar.xz: test_gpu and bench_gpu of main + all three patches (every head_dim),
# each `tar cf - ... | xz -T2 --lzma2=preset=6,dict=256MiB`, and the command
#   bash bench/gpu/pending/check.sh
# Steps: the multi-token, case and plan tests of C and E; 4bit_nc q 1, 4, 16 at 16x32768 interleaved
# against main; every preset at q 16; the SoA tensor-copy loader; the kernels of one q 16 decode (ncu);
# ncu source counters of C and E; racecheck and memcheck over the wide tests; E's whole test_gpu.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp bench/gpu/pending/check.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
for v in A C E; do mkdir -p /tmp/$v; python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('devrun/bins$v.tar.xz')).extractall('/tmp/$v')"; done
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }  # test_gpu reads tests/data where it was built
T=/tmp/C/test_gpu
W='GpuMultiToken.Wide*:GpuMultiToken.Specialized*'
pack() { (cd $OUT && tar czf 00-all.tgz *.log *.csv *.gz 2>/dev/null); }  # after each step: a cut call still returns what ran
step() { local n=$1 s=$2; shift 2; echo "== [$SECONDS s] $n" >> $OUT/info.log; timeout $s "$@" > $OUT/$n.log 2>&1; echo "   rc=$?" >> $OUT/info.log; tail -4 $OUT/$n.log; pack; }
F='GpuMultiToken.*:*GpuMultiTokenGrid*:GpuCases*:GpuPlan.*'
step test 150 $T --gtest_color=no --gtest_filter="$F"
step testE 150 /tmp/E/test_gpu --gtest_color=no --gtest_filter="$F"
ab() {
  for i in 1 2; do
    for v in A C E; do
      /tmp/$v/bench_gpu --mode fast --preset 4bit_nc --layout both --shape 16x32768 --q-len 1,4,16 --no-expanded --csv $OUT/ab-$v-$i.csv > /dev/null || return 1
    done
  done
  TQ_WIDE_LOADER=tensor /tmp/C/bench_gpu --mode fast --preset 4bit_nc --layout soa --shape 16x32768 --q-len 16,128 --no-expanded --csv $OUT/ab-Ctensor.csv > /dev/null || return 1
  /tmp/C/bench_gpu --mode fast --preset 4bit_nc --layout soa --shape 16x32768 --q-len 16,128 --no-expanded --csv $OUT/ab-Ccpasync.csv > /dev/null || return 1
  for v in A C E; do
    /tmp/$v/bench_gpu --mode fast --layout both --shape 16x32768 --q-len 16 --no-expanded --csv $OUT/presets-$v.csv > /dev/null || return 1
  done
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/ab-A-*.csv --current $OUT/ab-C-*.csv
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/ab-Ccpasync.csv --current $OUT/ab-Ctensor.csv
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/presets-A.csv --current $OUT/presets-C.csv
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/ab-A-*.csv --current $OUT/ab-E-*.csv
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/presets-A.csv --current $OUT/presets-E.csv
}
kernels() {  # every kernel of the first q 16 decodes, with its duration
  for v in A C; do
    echo "== $v"
    ncu --clock-control none --section SpeedOfLight --launch-count 12 /tmp/$v/bench_gpu --reps 1 --mode fast --preset 4bit_nc --layout soa --shape 16x32768 --q-len 16 --no-expanded 2>&1 | grep -E "^  [a-z_]+.*\(|Duration"
  done
}
src() {
  for v in C E; do
    ncu --clock-control none -k regex:'wide_specialized' --launch-count 1 \
      --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --import-source no -f -o /tmp/src-$v-soa \
      /tmp/$v/bench_gpu --reps 1 --mode fast --preset 4bit_nc --layout soa --shape 16x32768 --q-len 16 --no-expanded || return 1
    ncu -i /tmp/src-$v-soa.ncu-rep --page source --csv --print-source sass | gzip > $OUT/src-$v-soa-sass.csv.gz
    ncu -i /tmp/src-$v-soa.ncu-rep --page details --csv > $OUT/src-$v-soa-details.csv
  done
}
export -f ab kernels src; export OUT
step ab 240 bash -c ab
step kernels 90 bash -c kernels
step src 150 bash -c src
step racecheckE 100 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 /tmp/E/test_gpu --gtest_color=no --gtest_filter="$W"
step racecheck 100 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
step memcheckE 60 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 /tmp/E/test_gpu --gtest_color=no --gtest_filter="$W"
step memcheck 60 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
step testall 300 /tmp/E/test_gpu --gtest_color=no
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/info.log 2>&1
pack
cat $OUT/info.log
