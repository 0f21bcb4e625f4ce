#!/bin/bash
# Call A (session 38): the specialized wide kernel, main 84ff064 (bench A) against the consumer releasing
# its buffer at its step's end (bench B), D 128 builds for sm_90a: 4bit_nc q 1, 4, 16 at 16x32768 both
# layouts, interleaved; ncu source counters (per SASS instruction) and warp states of the q 16 launch.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
cp devrun/callA.sh $OUT/
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
for v in A B; do mkdir -p /tmp/$v; python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('devrun/bins$v.tar.xz')).extractall('/tmp/$v')"; done
pack() { (cd $OUT && tar czf 00-all.tgz *.log *.csv *.gz 2>/dev/null); }
step() { local n=$1 s=$2; shift 2; echo "== [$SECONDS s] $n" >> $OUT/info.log; timeout $s "$@" > $OUT/$n.log 2>&1; echo "   rc=$?" >> $OUT/info.log; tail -4 $OUT/$n.log; pack; }
ab() {
  for i in 1 2; do
    for v in A B; do
      /tmp/$v/bench_gpu --mode fast --preset 4bit_nc --layout both --shape 16x32768 --q-len 1,4,16 --no-expanded --csv $OUT/bench-$v-$i.csv > /dev/null || return 1
    done
  done
  python3 bench/gpu/compare_bench.py --limit 100 --baseline $OUT/bench-A-*.csv --current $OUT/bench-B-*.csv
}
src() {
  local v=$1 layout=$2
  ncu --clock-control none -k regex:'wide_specialized' --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --import-source no -f -o /tmp/src-$v-$layout \
    /tmp/$v/bench_gpu --reps 1 --mode fast --preset 4bit_nc --layout $layout --shape 16x32768 --q-len 16 --no-expanded || return 1
  ncu -i /tmp/src-$v-$layout.ncu-rep --page source --csv --print-source sass | gzip > $OUT/src-$v-$layout-sass.csv.gz
  ncu -i /tmp/src-$v-$layout.ncu-rep --page details --csv > $OUT/src-$v-$layout-details.csv
}
export -f ab src; export OUT
step ab 200 bash -c ab
step srcBsoa 150 bash -c "src B soa"
step srcAsoa 150 bash -c "src A soa"
step srcBaos 150 bash -c "src B aos"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/info.log 2>&1
pack
cat $OUT/info.log
