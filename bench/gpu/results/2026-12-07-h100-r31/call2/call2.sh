#!/bin/bash
# Call 2 (session 35): the spill-fix bench_gpu (built here, carried as devrun/bench_gpu.xz):
# (1) why the multi step's q 4 row differs from compare's: the multi step's command twice,
#     then 16x32768 alone without expanded rows, kept buffers and fresh buffers, alternating;
# (2) AoS q 4 against the plan's policies (fused heads off; cp.async loader);
# (3) the CPU experiment devrun/cpu_hk1.sh.
set -u
OUT=${OUT:-/tmp/tq-out}; mkdir -p $OUT
source .gpu-deps/setup.sh > $OUT/setup.log 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('devrun/bench_gpu.xz'), open('/tmp/bench_gpu','wb'))" && chmod +x /tmp/bench_gpu
B=/tmp/bench_gpu
for r in 1 2; do
  $B --mode fast --preset 4bit_nc --shape 1x4096,8x8192,16x32768 --q-len 1,2,4,8,16,128 --csv $OUT/m-multi-$r.csv > /dev/null
  echo "multi $r rc=$? $SECONDS s"
  $B --mode fast --preset 4bit_nc --shape 16x32768 --q-len 1,2,4,8,16 --no-expanded --csv $OUT/m-kept-$r.csv > /dev/null
  TQ_BENCH_FRESH_BUFFERS=1 $B --mode fast --preset 4bit_nc --shape 16x32768 --q-len 1,2,4,8,16 --no-expanded --csv $OUT/m-fresh-$r.csv > /dev/null
  $B --mode fast --preset 4bit_nc --shape 16x32768 --q-len 1,2,4,8,16 --csv $OUT/m-kept-exp-$r.csv > /dev/null
  echo "method round $r rc=$? $SECONDS s"
done
A="--mode fast --preset 4bit_nc --layout aos --shape 8x8192,16x32768 --q-len 1,2,4,8 --no-expanded"
for r in 1 2; do
  $B $A --csv $OUT/p-auto-$r.csv > /dev/null
  TQ_FAST_FUSED=off $B $A --csv $OUT/p-unfused-$r.csv > /dev/null
  TQ_FAST_LOADER=cp.async $B $A --csv $OUT/p-cpasync-$r.csv > /dev/null
  TQ_FAST_LOADER=cp.async TQ_FAST_FUSED=off $B $A --csv $OUT/p-cpasync-unfused-$r.csv > /dev/null
  echo "policy round $r rc=$? $SECONDS s"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $OUT/gpu.txt
python3 - $OUT <<'PY' | tee $OUT/summary.txt
import csv, glob, os, sys, collections
out = sys.argv[1]
def rows(path):
    d = {}
    for r in csv.reader(open(path)):
        if r and r[0].startswith('decode'): d[(' '.join(r[0].split()), r[4])] = float(r[1])
    return d
for kind in ('m-multi', 'm-kept', 'm-fresh', 'm-kept-exp', 'p-auto', 'p-unfused', 'p-cpasync', 'p-cpasync-unfused'):
    for path in sorted(glob.glob(f'{out}/{kind}-[0-9].csv')):
        d = rows(path)
        keys = [k for k in d if '16x32768' in k[0] and 'expanded' not in k[0] and 'q128' not in k[0]]
        print(os.path.basename(path), ' '.join(f"{k[0].split()[-1] if k[0].split()[-1].startswith('q') else 'q1'}/{k[1]}={d[k]:.1f}" for k in keys))
PY
bash devrun/cpu_hk1.sh > $OUT/cpu_hk1.out 2>&1; tail -12 $OUT/cpu_hk1.out
cd $OUT && tar czf 00-all.tgz --exclude=00-all.tgz . 
