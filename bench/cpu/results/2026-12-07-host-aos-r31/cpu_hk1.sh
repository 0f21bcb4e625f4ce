#!/bin/bash
# CPU experiment on the GPU machine's host: is the AoS surplus the access pattern (records
# Hk x slot apart) or the AoS code path (metadata per record, norm correction, 2-byte aligned
# loads)? bench_cpu with devrun/hk1.patch: rows with one KV head and 8 sequences (the same
# token-heads as B1x32768 at Hk 8, a head's records contiguous in both layouts).
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT/hk1
[ -f .gpu-deps/setup.sh ] && source .gpu-deps/setup.sh > $OUT/hk1/setup.log 2>&1
NEW=/tmp/tq-hk1; rm -rf $NEW; mkdir -p $NEW
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $NEW -xf -
(cd $NEW && patch -p1 < devrun/hk1.patch > $OUT/hk1/patch.log 2>&1) || { echo patch failed; exit 1; }
cd $NEW
cmake -S . -B build-x -G Ninja -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF > $OUT/hk1/build.log 2>&1 &&
  cmake --build build-x -j16 --target bench_cpu >> $OUT/hk1/build.log 2>&1 || { echo build failed; tail $OUT/hk1/build.log; exit 1; }
echo "built at $SECONDS s"; uptime
isa=$(grep -qw avx512bw /proc/cpuinfo && echo avx512 || echo avx2)
F=${TQ_HK1_FILTER:-"decode(-aos)?(-hk1)?/(4bit_nc|3bit_nc|k8v4)/B(1|8)x32768/t2/$isa"}
for round in 1 2 3; do
  timeout 150 taskset -c 0,1 build-x/bench/cpu/bench_cpu --benchmark_filter="$F" --benchmark_repetitions=${TQ_HK1_REPS:-6} \
    --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=csv \
    > $OUT/hk1/r$round.csv 2> $OUT/hk1/r$round.err
  echo "round $round rc=$? at $SECONDS s"
done
python3 - $OUT/hk1 <<'PY' | tee $OUT/hk1/summary.txt
import csv, glob, os, sys, statistics as st, collections
unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}
for path in sorted(glob.glob(f"{sys.argv[1]}/r*.csv")):
    rows = collections.defaultdict(list)
    for r in csv.reader(l for l in open(path) if l.startswith('"decode')):
        if r[0].endswith(("_mean", "_median", "_stddev", "_cv")): continue
        rows[r[0].split("/real_time")[0]].append(float(r[2]) * unit[r[4]])
    for preset in ("4bit_nc", "3bit_nc", "k8v4"):
        get = lambda k: [n for n in rows if n.startswith(k + "/" + preset + "/")]
        cells = []
        for k in ("decode", "decode-aos", "decode-hk1", "decode-aos-hk1"):
            n = get(k)
            cells.append(min(rows[n[0]]) if n else float("nan"))
        s8, a8, s1, a1 = cells
        print(f"{os.path.basename(path):7s} {preset:8s} min ms: SoA hk8 {s8:6.3f} AoS hk8 {a8:6.3f} SoA hk1 {s1:6.3f} AoS hk1 {a1:6.3f} | AoS/SoA hk8 {a8/s8:.3f} hk1 {a1/s1:.3f}")
PY
