#!/usr/bin/env bash
# A CPU experiment on the GPU machine's host, one device call (docs/PERFORMANCE.md,
# "The AoS layout against SoA"): bench_cpu of this tree ("base") and of a copy
# with PATCH applied ("new"), both built there with CUDA off; test_cpu of the
# patched tree on the host's ISA (the patch must keep every bit); then bench_cpu's
# decode rows at 2 threads (taskset -c 0,1), SoA and AoS, the repetitions
# interleaved at random inside each process, processes alternating between the
# builds; a summary of AoS / SoA per build and process. Logs and CSVs to $OUT.
#   bash bench/cpu/experiments/run_host_ab.sh PATCH   (e.g. the items over several KV heads: git show dc97fb4:bench/cpu/experiments/aos-head-items.patch)
#   TQ_AB_FILTER (default: the four presets at B1x32768 and B16x32768, avx512), TQ_AB_REPS (default 10)
set -u
patch_file=${1:?usage: run_host_ab.sh PATCH}
OUT=${OUT:-/tmp/tq-out}
mkdir -p "$OUT"
[ -f .gpu-deps/setup.sh ] && source .gpu-deps/setup.sh > "$OUT/setup.log" 2>&1
log() { echo "== [$SECONDS s] $*" | tee -a "$OUT/info.log"; }
NEW=/tmp/tq-ab-new
rm -rf "$NEW" && mkdir -p "$NEW" &&
  tar -cf - --exclude='./build*' --exclude=./.venv --exclude=./.git . | tar -C "$NEW" -xf -
(cd "$NEW" && patch -p1 < "$OLDPWD/$patch_file" > "$OUT/patch.log" 2>&1)
log "patch rc=$?"
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_TOOLS=OFF"
jobs=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
(cmake -S . -B build-ab $cfg -DTURBOQUANT_ENABLE_TESTS=OFF > "$OUT/build-base.log" 2>&1 &&
  cmake --build build-ab -j$jobs --target bench_cpu >> "$OUT/build-base.log" 2>&1; echo "base build rc=$?" >> "$OUT/info.log") &
(cd "$NEW" && cmake -S . -B build-ab $cfg > "$OUT/build-new.log" 2>&1 &&
  cmake --build build-ab -j$jobs --target bench_cpu test_cpu >> "$OUT/build-new.log" 2>&1; echo "new build rc=$?" >> "$OUT/info.log") &
wait
log built
lscpu > "$OUT/lscpu.txt"; uptime >> "$OUT/info.log"
timeout 200 "$NEW/build-ab/tests/test_cpu" --gtest_brief=1 > "$OUT/test_cpu.log" 2>&1
log "test_cpu (new) rc=$?"; tail -3 "$OUT/test_cpu.log"
isa=$(grep -qw avx512bw /proc/cpuinfo && echo avx512 || echo avx2)
F=${TQ_AB_FILTER:-"decode(-aos)?/(4bit_nc|k8v4|k3v4_nc|3bit_nc)/B(1|16)x32768/t2/$isa"}
for round in 1 2; do
  for build in base new; do
    bin=build-ab/bench/cpu/bench_cpu; [ $build = new ] && bin=$NEW/$bin
    timeout 280 taskset -c 0,1 $bin --benchmark_filter="$F" --benchmark_repetitions=${TQ_AB_REPS:-10} \
      --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_format=csv \
      > "$OUT/ab-$build-$round.csv" 2> "$OUT/ab-$build-$round.err"
    log "$build round $round rc=$?"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import csv, glob, os, sys, statistics as st, collections
out = sys.argv[1]
unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}
for path in sorted(glob.glob(f"{out}/ab-*.csv")):
    rows = collections.defaultdict(list)
    for r in csv.reader(l for l in open(path) if l.startswith('"decode')):
        if r[0].endswith(("_mean", "_median", "_stddev", "_cv")):
            continue
        rows[r[0].split("/real_time")[0]].append(float(r[2]) * unit[r[4]])  # real_time in ms
    for name in sorted(k for k in rows if k.startswith("decode/")):
        soa, aos = rows[name], rows.get(name.replace("decode/", "decode-aos/", 1))
        if not aos:
            continue
        print(f"{os.path.basename(path):14s} {name:36s} SoA min {min(soa):8.3f} med {st.median(soa):8.3f} ms | "
              f"AoS min {min(aos):8.3f} med {st.median(aos):8.3f} ms | AoS/SoA min {min(aos)/min(soa):.3f} "
              f"med {st.median(aos)/st.median(soa):.3f}")
PY
