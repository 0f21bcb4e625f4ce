#!/bin/bash
# CPU experiment on the GPU machine's host: bench_cpu of this tree with devrun/pf-ahead.patch
# (the decode item's prefetch distance from TQ_X_AHEAD, default 2 = the committed code),
# AoS and SoA rows at 2 threads, random interleaving, processes alternating over distances.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT/cpu
[ -f .gpu-deps/setup.sh ] && source .gpu-deps/setup.sh > $OUT/cpu/setup.log 2>&1
NEW=/tmp/tq-pf; rm -rf $NEW; mkdir -p $NEW
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $NEW -xf -
(cd $NEW && patch -p1 < devrun/pf-ahead.patch > $OUT/cpu/patch.log 2>&1) || { echo patch failed; exit 1; }
cd $NEW
cmake -S . -B build-pf -G Ninja -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF > $OUT/cpu/build.log 2>&1 &&
  cmake --build build-pf -j16 --target bench_cpu >> $OUT/cpu/build.log 2>&1 || { echo build failed; tail $OUT/cpu/build.log; exit 1; }
echo "built at $SECONDS s"; lscpu > $OUT/cpu/lscpu.txt; uptime
isa=$(grep -qw avx512bw /proc/cpuinfo && echo avx512 || echo avx2)
F=${TQ_PF_FILTER:-"decode(-aos)?/(4bit_nc|3bit_nc)/B1x32768/t2/$isa"}
for round in 1 2; do
  for a in ${TQ_PF_AHEAD:-2 4 3 6}; do
    TQ_X_AHEAD=$a timeout 100 taskset -c 0,1 build-pf/bench/cpu/bench_cpu --benchmark_filter="$F" --benchmark_repetitions=${TQ_PF_REPS:-8} \
      --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=csv \
      > $OUT/cpu/pf-a$a-r$round.csv 2> $OUT/cpu/pf-a$a-r$round.err
    echo "ahead $a round $round rc=$? at $SECONDS s"
  done
done
python3 - $OUT/cpu <<'PY' | tee $OUT/cpu/summary.txt
import csv, glob, os, sys, statistics as st, collections
unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}
for path in sorted(glob.glob(f"{sys.argv[1]}/pf-*.csv")):
    rows = collections.defaultdict(list)
    for r in csv.reader(l for l in open(path) if l.startswith('"decode')):
        if r[0].endswith(("_mean", "_median", "_stddev", "_cv")): continue
        rows[r[0].split("/real_time")[0]].append(float(r[2]) * unit[r[4]])
    for name in sorted(k for k in rows if k.startswith("decode/")):
        soa, aos = rows[name], rows.get(name.replace("decode/", "decode-aos/", 1))
        if not aos: continue
        print(f"{os.path.basename(path):14s} {name:34s} SoA min {min(soa):7.3f} med {st.median(soa):7.3f} | AoS min {min(aos):7.3f} med {st.median(aos):7.3f} | AoS/SoA min {min(aos)/min(soa):.3f} med {st.median(aos)/st.median(soa):.3f}")
PY
