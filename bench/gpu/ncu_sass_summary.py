#!/usr/bin/env python3
"""Summarize an Nsight Compute source page (per SASS instruction, CSV; run_h200.sh's
ncusrc step writes ncusrc-sass.csv.gz): instructions executed, shared-memory
wavefronts (where the page has them) and stall samples by opcode, the stall
reasons, and the same per SASS range when --range is given, or per register
role with --roles.

  python3 bench/gpu/ncu_sass_summary.py ncusrc-sass.csv.gz [--per N]
      [--range NAME:FIRST:END ...] [--roles]

--per N divides instruction and wavefront counts by N (e.g. the warp-steps of a
loop: the execution count of its hottest instructions); a range is [FIRST, END)
in the CSV's instruction order (0 = the first instruction row). --roles cuts the
kernel at its setmaxnreg instructions (USETMAXREG): the code before the first,
then from each to the next, named by what it does (raised: the consumer
warpgroups of wide_specialized.cuh; lowered: the producers). Code the compiler
placed after a role's loop (the shared epilogue) counts with the role before it.
"""
import argparse
import collections
import csv
import gzip
import re
import sys


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        sys.exit(f"csv {path!r}: cannot read it ({e})")
    header_at = next((i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r), None)
    if header_at is None:
        sys.exit(f"csv {path!r}: no header row with 'Source' and 'Instructions Executed' (not ncu's source page as CSV)")
    header = rows[header_at]
    return {h: i for i, h in enumerate(header)}, rows[header_at + 1:]


def number(row, ix, key):
    try:
        return float(row[ix[key]])
    except (KeyError, ValueError, IndexError):
        return 0.0


def opcode(source):
    return re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split(" ")[0]


WAVEFRONTS = "L1 Wavefronts Shared"
WAVEFRONTS_IDEAL = "L1 Wavefronts Shared Ideal"


def summarize(name, rows, ix, per, total_exec, total_samples, top):
    executed = collections.Counter()
    samples = collections.Counter()
    for r in rows:
        op = opcode(r[ix["Source"]])
        executed[op] += number(r, ix, "Instructions Executed")
        samples[op] += number(r, ix, "Warp Stall Sampling (All Samples)")
    e = sum(executed.values())
    s = sum(samples.values())
    shared = ""
    if WAVEFRONTS in ix:  # shared-memory wavefronts: the LSU's and the warpgroup mma's operand reads
        wf = sum(number(r, ix, WAVEFRONTS) for r in rows)
        ideal = sum(number(r, ix, WAVEFRONTS_IDEAL) for r in rows)
        shared = f", {wf / per:.1f} shared-memory wavefronts ({ideal / per:.1f} ideal)"
    print(f"== {name}: {e / per:.1f} instructions{' per unit' if per != 1 else ''}, "
          f"{100 * e / total_exec:.1f}% of executed, {100 * s / total_samples:.1f}% of stall samples{shared}")
    for op, n in executed.most_common(top):
        if n == 0:
            break
        print(f"   {op:24s} {n / per:9.1f}  {100 * samples[op] / max(s, 1):5.1f}% of this range's samples")


def role_ranges(rows, ix):
    """(name, first, end) of the code before the first setmaxnreg and from each to the next."""
    cuts = []
    for i, r in enumerate(rows):
        m = re.search(r"USETMAXREG\.(\w+)", r[ix["Source"]])
        if m:
            cuts.append((i, "lowered" if m.group(1).startswith("DEALLOC") else "raised"))  # TRY_ALLOC raises
    if not cuts:
        sys.exit("--roles: the kernel has no setmaxnreg (USETMAXREG) instruction")
    out = [("before the roles", 0, cuts[0][0])] if cuts[0][0] > 0 else []
    for k, (first, kind) in enumerate(cuts):
        end = cuts[k + 1][0] if k + 1 < len(cuts) else len(rows)
        out.append((f"{kind} registers (from row {first})", first, end))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--per", type=float, default=1.0)
    ap.add_argument("--range", action="append", default=[], help="NAME:FIRST:END")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--roles", action="store_true", help="one range per setmaxnreg role")
    a = ap.parse_args()
    ix, rows = read_rows(a.csv)
    if a.per <= 0:
        sys.exit(f"--per {a.per}: must be positive")
    ranges = []
    for spec in a.range:
        try:
            name, first, end = spec.rsplit(":", 2)
            first, end = int(first), int(end)
        except ValueError:
            sys.exit(f"--range {spec!r}: expected NAME:FIRST:END")
        if not 0 <= first < end <= len(rows):
            sys.exit(f"--range {spec!r}: FIRST and END must satisfy 0 <= FIRST < END <= {len(rows)}")
        ranges.append((name, first, end))
    total_exec = sum(number(r, ix, "Instructions Executed") for r in rows) or 1.0
    total_samples = sum(number(r, ix, "Warp Stall Sampling (All Samples)") for r in rows) or 1.0
    summarize("kernel", rows, ix, a.per, total_exec, total_samples, a.top)
    stalls = [h for h in ix if h.startswith("stall_") and "Not Issued" not in h]
    shares = {h[6:]: sum(number(r, ix, h) for r in rows) / total_samples for h in stalls}
    print("== stall reasons (share of samples): " +
          ", ".join(f"{k} {v:.3f}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]) if v >= 0.005))
    if a.roles:
        ranges += role_ranges(rows, ix)
    for name, first, end in ranges:
        summarize(name, rows[first:end], ix, a.per, total_exec, total_samples, a.top)

if __name__ == "__main__":
    main()
