"""Diagnostics for docs/PERFORMANCE.md (Python run 5): kernel durations of a
turboquant.decode call under Nsight Compute (run this under ncu), and the host time
of eager calls on the default and on a side stream.
    python probe_harness.py ncu SHAPE      (SHAPE 1x4096 or 16x32768; bench_gpu's bytes)
    python probe_harness.py host
    python probe_harness.py graph          (the library's graph, one replay alone, timed
                                            as bench_gpu times it: cache copies in separate
                                            allocations or in one, replayed on the default
                                            or on a side stream)"""
import sys
import time

import torch

import bench_python as bp
import turboquant as tq


def setup(batch, seq):
    layout, caches, table, lens, query = bp.make(batch, seq, data="bench_gpu_bytes", copies_bytes=0)
    out, lse, ws = bp.buffers(query)
    call = lambda: tq.decode(query, caches[0], table, lens, layout, bp.D ** -0.5, bp.SPLITS, out=out, lse=lse,
                             workspace=ws)
    pi, centroids = bp.hadamard(), torch.from_numpy(tq.codebook(4, bp.D).centroids).cuda()
    drop = lambda: bp.v2_call(layout, caches[0], table, lens, query, pi, centroids, out, lse)
    return call, drop


def graph_probe(batch, seq, reps=50):
    layout, caches, table, lens, query = bp.make(batch, seq, data="bench_gpu_bytes")
    out, lse, ws = bp.buffers(query)
    one = torch.empty((len(caches),) + tuple(caches[0].shape), dtype=torch.uint8, device="cuda")
    for i, c in enumerate(caches):
        one[i].copy_(c)
    torch.cuda.synchronize()
    for name, copies in (("separate allocations", caches), ("one allocation", [one[i] for i in range(len(caches))])):
        for where in ("default", "side"):
            s = torch.cuda.Stream()
            g = bp.graph_of(copies, lambda c: tq.decode(query, c, table, lens, layout, bp.D ** -0.5, bp.SPLITS, out=out,
                                                        lse=lse, workspace=ws), s)
            stream = torch.cuda.current_stream() if where == "default" else s
            with torch.cuda.stream(stream):
                us = bp.event_us(g.replay, reps) / len(copies)
            print(f"graph {batch}x{seq}, {len(copies)} copies in {name}, replayed on the {where} stream: "
                  f"{us:.2f} us per call")


if sys.argv[1] == "graph":
    graph_probe(1, 4096)
    graph_probe(16, 32768)
elif sys.argv[1] == "ncu":
    b, s = map(int, sys.argv[2].split("x"))
    call, _ = setup(b, s)
    for _ in range(6):
        call()
    torch.cuda.synchronize()
else:
    call, drop = setup(16, 32768)
    for name, f in (("turboquant.decode", call), ("drop-in v2", drop)):
        for where in ("default", "side"):
            stream = torch.cuda.current_stream() if where == "default" else torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    f()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(50):
                    f()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
            print(f"{name} on the {where} stream: host {1e6 * (t1 - t0) / 50:.1f} us per call to enqueue, "
                  f"{1e6 * (t2 - t0) / 50:.1f} us per call to finish")
