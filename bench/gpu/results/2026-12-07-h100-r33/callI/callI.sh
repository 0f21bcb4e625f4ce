#!/bin/bash
# Call I (session 37): the specialized wide kernel with two producer warpgroups (branch wip-wide-two-producers), binaries built on the
# session's machine (sm_90a, Release) and carried (devrun/bins2.tar.xz): the multi-token, case and
# plan tests; the wide rows under both wide kernels (TQ_WIDE_KERNEL), interleaved; racecheck and
# memcheck over the wide tests.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callI.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('devrun/bins2.tar.xz')).extractall('/tmp/bins')"
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }  # test_gpu reads tests/data where it was built
T=/tmp/bins/test_gpu
B=/tmp/bins/bench_gpu
W='GpuMultiToken.Wide*:GpuMultiToken.Specialized*'
pack() { (cd $OUT && tar czf 00-all.tgz *.log *.csv 2>/dev/null); }  # after each step: a cut call still returns what ran
step() { local n=$1 s=$2; shift 2; echo "== [$SECONDS s] $n" >> $OUT/info.log; timeout $s "$@" > $OUT/$n.log 2>&1; echo "   rc=$?" >> $OUT/info.log; tail -4 $OUT/$n.log; pack; }
step test 100 $T --gtest_color=no --gtest_filter='GpuMultiToken.*:*GpuMultiTokenGrid*:GpuCases*:GpuPlan.*'
ab() {
  for i in 1; do
    for k in specialized classic; do
      TQ_WIDE_KERNEL=$k $B --mode fast --preset 4bit_nc --layout both --shape 8x8192,16x32768 --q-len 1,4,16,128 --no-expanded --csv $OUT/ab-$k-$i.csv > /dev/null || return 1
    done
  done
  for k in specialized classic; do
    TQ_WIDE_KERNEL=$k $B --mode fast --layout both --shape 16x32768 --q-len 16 --no-expanded --csv $OUT/presets-$k.csv > /dev/null || return 1
  done
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/ab-classic-*.csv --current $OUT/ab-specialized-*.csv
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/presets-classic.csv --current $OUT/presets-specialized.csv
}
export -f ab; export B OUT
step ab 180 bash -c ab
step racecheck 80 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
step memcheck 50 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/info.log 2>&1
pack
cat $OUT/info.log
