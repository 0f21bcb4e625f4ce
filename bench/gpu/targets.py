#!/usr/bin/env python3
"""The open issues' speed targets, read from bench_gpu CSVs of one device run:
each target's ratio per row and whether it holds. The targets are issue 12's
(AoS time / SoA time: fast decode 1.1x, strict decode and encode 1.15x, per
preset and shape) and issue 13's (16 x 32768, 4bit_nc, fast: q_len 4 at most
1.3x and q_len 16 at most 2x the time of q_len 1; every dequantize row at least
0.70 of the copy ceiling), and the CPU ones (1 x 32768, 2 threads: decode AoS /
SoA 1.15x, q_len 4 at most 3x q_len 1). The GPU targets are defined on the
H200: on other GPUs the verdicts only say where that GPU stands.

  targets.py [--bench CSV ...] [--multi CSV ...] [--dequantize CSV ...] [--cpu CSV ...]

--bench: the bench step's CSVs (decode and encode rows of both layouts),
--multi: the multi step's (fast 4bit_nc rows with q_len), --dequantize: the
dequantize step's; --cpu: bench_cpu's --benchmark_format=json (or csv) output
with the decode/, decode-aos/ and decode-multi/ rows at B1x32768/t2 (a ratio
per ISA; each row's runs, or its median aggregates where only those were
reported). Several files of one kind (interleaved rounds) give each row its
median. Prints one line per row and a summary per target; exits 1 if a
target misses, 2 on unreadable input.
"""
import argparse
import csv
import json
import re
import signal
import statistics
import sys

from bench_csv import read_bench_csv

FAST_AOS_LIMIT = 1.10
STRICT_AOS_LIMIT = 1.15
ENCODE_AOS_LIMIT = 1.15
Q4_LIMIT = 1.3
Q16_LIMIT = 2.0
DEQUANTIZE_FLOOR = 0.70
MULTI_SHAPE = "16x32768"
MULTI_PRESET = "4bit_nc"
CPU_AOS_LIMIT = 1.15
CPU_Q4_LIMIT = 3.0
CPU_SHAPE = "B1x32768"
CPU_THREADS = "t2"


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


def load(paths, what):
    """{(name words, layout): median us} and {(name words, layout): median fraction of the copy ceiling}."""
    times, fractions = {}, {}
    for path in paths:
        try:
            table = read_bench_csv(path)
        except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
            fail(f"{what} csv {path!r}: cannot read it ({e})")
        # Which GPU ran it: an H200 copies about 4.2 TB/s, an H100 about 3.0.
        print(f"{what} csv {path}: copy ceiling {table.copy_ceiling_gbps:.0f} GB/s")
        for row in table.rows:
            times.setdefault((row.what, row.layout), []).append(row.us)
            fractions.setdefault((row.what, row.layout), []).append(row.fraction)
    med = lambda d: {k: statistics.median(v) for k, v in d.items()}
    return med(times), med(fractions)


def load_cpu(paths):
    """{benchmark name without /real_time: median ms} from Google Benchmark JSON or CSV
    output (JSON where one run mixes decode and decode-multi rows: the CSV reporter
    aborts on rows with different counters)."""
    times, medians = {}, {}  # per run; the median aggregates (where only aggregates were reported)

    def add(name, run_type, real_time, unit):
        stem, _, suffix = name.rpartition("_")
        is_aggregate = run_type == "aggregate" or suffix in ("mean", "median", "stddev", "cv")
        if is_aggregate and suffix != "median":
            return
        ms = float(real_time) * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
        if is_aggregate:
            medians.setdefault(stem.removesuffix("/real_time"), []).append(ms)
        else:
            times.setdefault(name.removesuffix("/real_time"), []).append(ms)

    for path in paths:
        try:
            with open(path, newline="") as f:
                text = f.read()
            if text.lstrip().startswith("{"):
                for b in json.loads(text)["benchmarks"]:
                    if not b.get("error_occurred"):
                        add(b["name"], b.get("run_type", "iteration"), b["real_time"], b["time_unit"])
                continue
            lines = text.splitlines()
            header = next((i for i, line in enumerate(lines) if line.startswith("name,")), None)
            if header is None:
                fail(f"cpu file {path!r}: neither Google Benchmark JSON nor CSV (no row starting with 'name,')")
            for r in csv.DictReader(lines[header:]):
                if r.get("error_occurred") != "true":
                    add(r["name"], "iteration", r["real_time"], r["time_unit"])
        except (OSError, UnicodeDecodeError, csv.Error, ValueError, KeyError, TypeError) as e:
            fail(f"cpu file {path!r}: cannot read it ({e!r})")
    for name, values in medians.items():
        times.setdefault(name, values)
    return {k: statistics.median(v) for k, v in times.items()}


def cpu_rows(times):
    """(AoS / SoA rows, q 4 / q 1 rows) of the CPU targets."""
    aos, multi = [], []
    for name, ms in sorted(times.items()):  # ms: a SoA row or a q 1 row
        parts = name.split("/")  # decode/<preset>/<shape>/<threads>/<isa>
        if len(parts) == 5 and parts[0] == "decode" and parts[2:4] == [CPU_SHAPE, CPU_THREADS]:
            aos_ms = times.get("/".join(["decode-aos"] + parts[1:]))
            if aos_ms is not None:
                aos.append((f"{parts[1]} {parts[4]}", aos_ms / ms, f"AoS {aos_ms:.2f} ms / SoA {ms:.2f} ms"))
        # decode-multi/<preset>/<shape>/q1/<threads>/<isa>/single
        if len(parts) == 7 and parts[0] == "decode-multi" and parts[2] == CPU_SHAPE and parts[3:5] == ["q1", CPU_THREADS]:
            q4 = times.get("/".join(parts[:3] + ["q4", CPU_THREADS, parts[5], "rows"]))
            if q4 is not None:
                multi.append((f"{parts[1]} {parts[5]}", q4 / ms, f"q 4 {q4:.2f} ms / q 1 {ms:.2f} ms"))
    return aos, multi


class Report:
    def __init__(self):
        self.summary = []  # (target, rows, misses, worst)

    def target(self, title, rows, limit, at_most=True):
        """rows: [(label, value, detail)]; prints them and records the verdict."""
        print(f"== {title}")
        if not rows:
            print("   no rows in the input")
            self.summary.append((title, 0, 0, None))
            return
        misses = 0
        for label, value, detail in rows:
            ok = value <= limit if at_most else value >= limit
            misses += not ok
            print(f"   {label:<42} {value:7.4f}  {'ok  ' if ok else 'MISS'}  {detail}")
        worst = max(v for _, v, _ in rows) if at_most else min(v for _, v, _ in rows)
        self.summary.append((title, len(rows), misses, worst))

    def finish(self):
        print("== summary")
        failed = False
        for title, n, misses, worst in self.summary:
            if n == 0:
                print(f"   {title}: not measured")
                continue
            failed |= misses > 0
            verdict = "holds" if misses == 0 else f"misses {misses} of {n} rows"
            print(f"   {title}: {verdict} (worst {worst:.4f})")
        return 1 if failed else 0


def plain_row(words):
    """Whether a row name is the targets' kind of row: one token a sequence at
    head_dim 128, timed once from an idle device (no "qQ", "expanded", "dD" or
    "sustained" word)."""
    return not any(re.fullmatch(r"q\d+|d\d+|expanded|sustained", w) for w in words)


def aos_over_soa(times, kind):
    """(label, AoS / SoA, detail) for every plain row name of `kind` measured in both layouts."""
    rows = []
    for (name, layout), soa_us in sorted(times.items()):
        if layout != "soa" or name[: len(kind)] != kind or not plain_row(name[len(kind):]):
            continue
        aos_us = times.get((name, "aos"))
        if aos_us is None:
            continue
        label = " ".join(name[len(kind):])
        rows.append((label, aos_us / soa_us, f"AoS {aos_us:.2f} us / SoA {soa_us:.2f} us"))
    return rows


def multi_ratios(times, q_len):
    rows = []
    for layout in ("soa", "aos"):
        single = times.get((("decode", "fast", MULTI_PRESET, MULTI_SHAPE), layout))
        multi = times.get((("decode", "fast", MULTI_PRESET, MULTI_SHAPE, f"q{q_len}"), layout))
        if single is None or multi is None:
            continue
        rows.append((f"{MULTI_PRESET} {MULTI_SHAPE} {layout}", multi / single,
                     f"q {q_len} {multi:.2f} us / q 1 {single:.2f} us"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", nargs="+", default=[], metavar="CSV")
    ap.add_argument("--multi", nargs="+", default=[], metavar="CSV")
    ap.add_argument("--dequantize", nargs="+", default=[], metavar="CSV")
    ap.add_argument("--cpu", nargs="+", default=[], metavar="CSV")
    args = ap.parse_args()
    if not (args.bench or args.multi or args.dequantize or args.cpu):
        ap.error("give at least one of --bench, --multi, --dequantize, --cpu")
    report = Report()
    if args.bench:
        times, _ = load(args.bench, "bench")
        report.target(f"issue 12: fast decode AoS / SoA <= {FAST_AOS_LIMIT}",
                      aos_over_soa(times, ("decode", "fast")), FAST_AOS_LIMIT)
        report.target(f"issue 12: strict decode AoS / SoA <= {STRICT_AOS_LIMIT}",
                      aos_over_soa(times, ("decode", "strict")), STRICT_AOS_LIMIT)
        report.target(f"issue 12: encode AoS / SoA <= {ENCODE_AOS_LIMIT}",
                      aos_over_soa(times, ("encode",)), ENCODE_AOS_LIMIT)
    if args.multi:
        times, _ = load(args.multi, "multi")
        report.target(f"issue 13: q 4 / q 1 <= {Q4_LIMIT}", multi_ratios(times, 4), Q4_LIMIT)
        report.target(f"issue 13: q 16 / q 1 <= {Q16_LIMIT}", multi_ratios(times, 16), Q16_LIMIT)
    if args.dequantize:
        _, fractions = load(args.dequantize, "dequantize")
        rows = [(" ".join(name[1:]) + f" {layout}", f, "fraction of the copy ceiling")
                for (name, layout), f in sorted(fractions.items()) if name[0] == "dequantize"]
        report.target(f"issue 13: dequantize >= {DEQUANTIZE_FLOOR} of the copy ceiling", rows, DEQUANTIZE_FLOOR,
                      at_most=False)
    if args.cpu:
        aos, multi = cpu_rows(load_cpu(args.cpu))
        report.target(f"issue 12: CPU decode AoS / SoA <= {CPU_AOS_LIMIT}", aos, CPU_AOS_LIMIT)
        report.target(f"issue 13: CPU q 4 / q 1 <= {CPU_Q4_LIMIT}", multi, CPU_Q4_LIMIT)
    return report.finish()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    sys.exit(main())
