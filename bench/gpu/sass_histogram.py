#!/usr/bin/env python3
"""Opcode histogram of a cuobjdump -sass listing: sass_histogram.py FILE [top]."""
import collections
import re
import sys

line_re = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
counts = collections.Counter()
total = 0
for line in open(sys.argv[1]):
    m = line_re.search(line)
    if not m:
        continue
    op = m.group(3).split(".")[0]
    counts[op] += 1
    total += 1
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
print(f"{sys.argv[1]}: {total} instructions")
for op, n in counts.most_common(top):
    print(f"  {op:10s} {n:6d} {100.0 * n / max(total, 1):5.1f}%")
