#!/bin/bash
# Call G (session 36): the merged form of wip-wide-interleave (b328a72), binaries built on the
# session's machine (sm_90a, Release) and carried (devrun/bins.tar.xz): the multi-token, case
# and plan tests; racecheck and memcheck over the wide tests; the 16 x 32768 q 1 / q 16 rows.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callG.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('devrun/bins.tar.xz')).extractall('/tmp/bins')"
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }  # test_gpu reads tests/data where it was built
T=/tmp/bins/test_gpu
W='GpuMultiToken.Wide*:*GpuMultiTokenGrid*/2*'
step() { local n=$1 s=$2; shift 2; echo "== [$SECONDS s] $n" >> $OUT/info.log; timeout $s "$@" > $OUT/$n.log 2>&1; echo "   rc=$?" >> $OUT/info.log; tail -4 $OUT/$n.log; }
step test 70 $T --gtest_color=no --gtest_filter='GpuMultiToken.*:*GpuMultiTokenGrid*:GpuCases*:GpuPlan.*'
step racecheck 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
step memcheck 40 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $T --gtest_color=no --gtest_filter="$W"
step bench 25 /tmp/bins/bench_gpu --mode fast --layout both --shape 16x32768 --q-len 1,16 --no-expanded --csv $OUT/wide.csv
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/info.log 2>&1
cat $OUT/info.log
