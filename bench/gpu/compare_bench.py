#!/usr/bin/env python3
"""Compare bench_gpu CSVs measured in one device run: a baseline binary and the
current one, each run one or more times (interleaved, so clock and thermal drift
hit both alike). Prints, per benchmark row, the median time of each side and the
ratio current / baseline, and exits 1 if any ratio exceeds --limit. Rows pair
by (what, layout); a CSV without a layout column (older binaries) is SoA.

  compare_bench.py --baseline a1.csv a2.csv --current b1.csv b2.csv [--limit 1.02]
"""
import argparse
import statistics
import sys

from bench_csv import read_bench_csv


def load(paths):
    rows = {}
    for path in paths:
        for row in read_bench_csv(path).rows:
            rows.setdefault(f"{' '.join(row.what)} {row.layout}", []).append(row.us)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", nargs="+", required=True)
    ap.add_argument("--current", nargs="+", required=True)
    ap.add_argument("--limit", type=float, default=1.02, help="largest allowed current/baseline time ratio")
    args = ap.parse_args()
    base, cur = load(args.baseline), load(args.current)
    worst = 0.0
    over = []
    print(f"{'benchmark':44s} {'baseline us':>12s} {'current us':>11s} {'ratio':>7s}")
    for name in base:
        if name not in cur:
            print(f"{name:44s} missing in the current run")
            over.append(name)
            continue
        b, c = statistics.median(base[name]), statistics.median(cur[name])
        ratio = c / b if b > 0 else float("inf")
        worst = max(worst, ratio)
        flag = "  <-- over" if ratio > args.limit else ""
        if flag:
            over.append(name)
        print(f"{name:44s} {b:12.2f} {c:11.2f} {ratio:7.3f}{flag}")
    ratios = [statistics.median(cur[n]) / statistics.median(base[n]) for n in base if n in cur]
    if ratios:
        print(f"geometric mean ratio {statistics.geometric_mean(ratios):.4f}, worst {worst:.3f}, limit {args.limit}")
    if over:
        print(f"{len(over)} benchmark(s) over the limit: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
