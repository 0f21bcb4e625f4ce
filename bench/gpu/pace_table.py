#!/usr/bin/env python3
"""The pace step's table (run_h200.sh pace): for each mode, preset and shape,
the minimum over rounds of SoA and of every AoS configuration, and each AoS
time over SoA's.

    python3 bench/gpu/pace_table.py DIR     (DIR holds pace-<mode>-*.csv)
"""
import collections
import pathlib
import re
import sys

from bench_csv import read_bench_csv


def rows(path):
    for row in read_bench_csv(path).rows:
        if row.what[0] == "decode" and len(row.what) >= 4:
            yield row.what[1], row.what[2], row.what[3], row.us


def main(directory):
    best = collections.defaultdict(dict)  # (mode, preset, shape) -> config -> us
    configs = []
    for path in sorted(pathlib.Path(directory).glob("pace-*.csv")):
        m = re.match(r"pace-(\w+)-(soa|aos)(?:-(c\d+-t\d+(?:-p[a-z0-9]+)?(?:-f\d)?))?-\d+\.csv", path.name)
        if not m:
            continue
        config = "soa" if m.group(2) == "soa" else m.group(3)
        if config not in configs:
            configs.append(config)
        for mode, preset, shape, us in rows(path):
            key = (mode, preset, shape)
            best[key][config] = min(us, best[key].get(config, float("inf")))
    configs.sort(key=lambda c: (c != "soa", c))
    print("| mode | preset | shape | " + " | ".join(configs) + " |")
    print("|---" * (3 + len(configs)) + "|")
    for key in sorted(best):
        soa = best[key].get("soa")
        cells = []
        for c in configs:
            us = best[key].get(c)
            if us is None:
                cells.append("")
            elif c == "soa" or soa is None:
                cells.append(f"{us:.2f}")
            else:
                cells.append(f"{us:.2f} ({us / soa:.3f})")
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
