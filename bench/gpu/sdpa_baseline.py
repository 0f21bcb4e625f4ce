#!/usr/bin/env python3
"""Uncompressed baseline for bench_gpu: torch SDPA (bf16) decode on the same
shapes (D 128, Hq 32, Hk 8, one query token per sequence), timed like
bench_gpu: CUDA-graph replay under CUDA events, median, with the K/V copies
rotated so that reads come from HBM. Also measures the same copy ceiling.

    python3 bench/gpu/sdpa_baseline.py [--csv FILE]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

SHAPES = [(1, 4096), (1, 32768), (8, 8192), (32, 8192), (64, 4096), (16, 32768)]
D, HQ, HK = 128, 32, 8


def time_graph(fn, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def copy_ceiling():
    n = 1 << 31
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for i in range(12):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        if i >= 2:
            times.append(a.elapsed_time(b))
    return 2 * n / (statistics.median(times) * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    args = ap.parse_args()
    torch.manual_seed(0)
    ceiling = copy_ceiling()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, copy ceiling {ceiling:.0f} GB/s")
    rows = []
    for b, seq in SHAPES:
        kv_bytes = b * seq * HK * D * 2 * 2
        copies = max(1, (384 << 20) // kv_bytes)
        q = torch.randn(b, HQ, 1, D, device="cuda", dtype=torch.bfloat16)
        ks = [torch.randn(b, HK, seq, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        vs = [torch.randn(b, HK, seq, D, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        outs = [None] * copies

        def run():
            for i in range(copies):
                outs[i] = F.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)

        ms = time_graph(run) / copies
        us = ms * 1e3
        bytes_ = kv_bytes + 2 * b * HQ * D * 2
        gbs = bytes_ / (us * 1e-6) / 1e9
        print(f"sdpa bf16 {b:2d}x{seq:<6d} {us:9.1f} us {gbs:7.0f} GB/s {100 * gbs / ceiling:5.1f}% of copy")
        rows.append((f"sdpa_bf16 {b}x{seq}", us, gbs, gbs / ceiling))
        del ks, vs, outs
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("what,us,GBps,fraction_of_copy\n")
            for r in rows:
                f.write("%s,%.2f,%.1f,%.4f\n" % r)


if __name__ == "__main__":
    main()
