"""bench_gpu's --csv output, read once for every script here (compare_bench.py,
pace_table.py, targets.py): columns what, us, GBps, fraction_of_copy and layout
(absent in older binaries' files: SoA). The copy_ceiling row is the device-to-device
copy bandwidth the fractions are of; every other row is one benchmark."""
import csv
from typing import NamedTuple


class BenchRow(NamedTuple):
    what: tuple  # the row's name, split into words: ("decode", "fast", "4bit_nc", "16x32768", "q16")
    layout: str
    us: float
    fraction: float  # of the copy ceiling


class BenchCsv(NamedTuple):
    copy_ceiling_gbps: float  # 0 where the file has no copy_ceiling row
    rows: list


def read_bench_csv(path):
    """The file's rows; raises OSError, csv.Error or ValueError (a bad number, or
    a missing column: not a bench_gpu --csv file)."""
    ceiling, rows = 0.0, []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for column in ("what", "us"):
            if column not in (reader.fieldnames or []):
                raise ValueError(f"no column {column!r} (not a bench_gpu --csv file)")
        for r in reader:
            what = tuple(r["what"].split())
            if not what:
                continue
            if what[0] == "copy_ceiling":
                ceiling = float(r.get("GBps") or 0)
                continue
            rows.append(BenchRow(what, r.get("layout") or "soa", float(r["us"]), float(r.get("fraction_of_copy") or 0)))
    return BenchCsv(ceiling, rows)
