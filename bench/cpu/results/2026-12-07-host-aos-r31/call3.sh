#!/bin/bash
# Call 3 (session 35), the GPU machine's host: bench_cpu of main ("base") and of main with
# devrun/gather-ko.patch ("new": AoS tile metadata by AVX-512 gathers, plus two timing-only
# knock-outs read from the environment: TQ_X_NOCORR (no decode-time norm correction) and
# TQ_X_NOMETA (no AoS metadata reads)); test_cpu of "new" (no knock-out: must keep every bit);
# AoS and SoA rows at 2 threads, repetitions interleaved at random, processes alternating.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
[ -f .gpu-deps/setup.sh ] && source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
NEW=/tmp/tq-new; rm -rf $NEW; mkdir -p $NEW
tar -cf - --exclude='./build*' --exclude=./.git --exclude=./bench/gpu/results --exclude=./bench/cpu/results . | tar -C $NEW -xf -
(cd $NEW && patch -p1 < devrun/gather-ko.patch > $OUT/patch.log 2>&1) || { echo patch failed; exit 1; }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF"
(cmake -S . -B build-base $cfg -DTURBOQUANT_ENABLE_TESTS=OFF > $OUT/build-base.log 2>&1 && cmake --build build-base -j8 --target bench_cpu >> $OUT/build-base.log 2>&1; echo "base build rc=$?") &
(cd $NEW && cmake -S . -B build-new $cfg > $OUT/build-new.log 2>&1 && cmake --build build-new -j8 --target bench_cpu test_cpu >> $OUT/build-new.log 2>&1; echo "new build rc=$?") &
wait
echo "built at $SECONDS s"; uptime
timeout 100 $NEW/build-new/tests/test_cpu --gtest_brief=1 > $OUT/test_cpu.log 2>&1; echo "test_cpu (new) rc=$? at $SECONDS s"; tail -2 $OUT/test_cpu.log
F="decode(-aos)?/(4bit_nc|3bit_nc)/B1x32768/t2/avx512"
run() {  # name env...
  local name=$1; shift
  env "$@" timeout 100 taskset -c 0,1 $bin --benchmark_filter="$F" --benchmark_repetitions=6 \
    --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=csv > $OUT/$name.csv 2> $OUT/$name.err
  echo "$name rc=$? at $SECONDS s"
}
for round in 1 2; do
  bin=build-base/bench/cpu/bench_cpu; run base-$round X=1
  bin=$NEW/build-new/bench/cpu/bench_cpu; run gather-$round X=1
  run gather-nocorr-$round TQ_X_NOCORR=1
  run gather-nometa-$round TQ_X_NOMETA=1
done
python3 - $OUT <<'PY' | tee $OUT/summary.txt
import csv, glob, os, sys, statistics as st, collections
unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}
for path in sorted(glob.glob(f"{sys.argv[1]}/*-[12].csv")):
    rows = collections.defaultdict(list)
    for r in csv.reader(l for l in open(path) if l.startswith('"decode')):
        if r[0].endswith(("_mean", "_median", "_stddev", "_cv")): continue
        rows[r[0].split("/real_time")[0]].append(float(r[2]) * unit[r[4]])
    for name in sorted(k for k in rows if k.startswith("decode/")):
        soa, aos = rows[name], rows.get(name.replace("decode/", "decode-aos/", 1))
        if not aos: continue
        print(f"{os.path.basename(path):22s} {name.split('/')[1]:8s} SoA min {min(soa):7.3f} med {st.median(soa):7.3f} | AoS min {min(aos):7.3f} med {st.median(aos):7.3f} | AoS/SoA min {min(aos)/min(soa):.3f} med {st.median(aos)/st.median(soa):.3f}")
PY
cd $OUT && tar czf /tmp/all.tgz . && mv /tmp/all.tgz $OUT/00-all.tgz
