"""The Python package's cost on the GPU (docs/PERFORMANCE.md, issue 14):

1. overhead: host time per eager CUDA ``turboquant.decode`` call (1 x 4096, median of
   1,000 calls, each alone: the device is drained between calls) minus the host time
   of the library's C++ ``cuda::decode`` with the same arguments, timed the same way
   inside the extension (``_decode_call_ns``).
2. drop-in: the seed's ``triton_turboquant_decode_attention_v2`` (turboquant.vllm) on
   torch CUDA tensors, Hq 32, Hk 8, D 128, bf16 query, 4bit_nc SoA, 32 splits:
   CUDA-graph replay (like bench_gpu: cache copies filling 384 MiB, so reads come from
   HBM) at 16 x 32768 and 1 x 4096, and eager calls at 16 x 32768, against bench_gpu's
   fast row of the same shape (``--bench-gpu-csv``, from the same machine and run), on
   encoded N(0, 1) K/V, on bench_gpu's data distributions and on bench_gpu's own bytes
   (``make``). Eager calls are timed alone, 20 back to back between two events, and
   20 back to back on the host clock; back-to-back calls are also compared with
   bench_gpu's ``--sustained`` row (its graph replayed back to back) where the CSV has
   it. Each graph is captured, timed and released on its own (``drop_in``).

    python bench_python.py [--bench-gpu-csv FILE] [--calls 1000] [--reps 50] [--shapes 16x32768,1x4096]
                           [--data encoded,bench_gpu,bench_gpu_bytes] [--no-overhead]
Prints one line per measurement and, with --bench-gpu-csv, the ratios."""

import argparse
import csv
import statistics
import time

import numpy as np
import torch

import turboquant as tq
from turboquant import _turboquant as ext
from turboquant.vllm.ops.turboquant_soa.triton_turboquant_decode_v2 import triton_turboquant_decode_attention_v2

HQ, HK, D, BS, SPLITS = 32, 8, 128, 16, 32


def hash32(x):
    """bench_gpu.cu's hash32 on numpy uint64 (wrapping)."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xff51afd7ed558ccd)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xc4ceb9fe1a85ec53)
        x ^= x >> np.uint64(33)
    return (x & np.uint64(0xffffffff)).astype(np.uint32)


def unit(x):
    """bench_gpu's (hash32(.) >> 8) * 2^-24 as float32."""
    return (hash32(x) >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def fma(a, b, u):
    """float32 a + b * u with one rounding, as nvcc contracts it (exact in float64 first)."""
    return (np.float64(np.float32(b)) * u.astype(np.float64) + np.float64(np.float32(a))).astype(np.float32)


def bench_gpu_bytes(layout, num_blocks, copies):
    """bench_gpu's own bytes (fill_cache, fill_meta of bench_decode; 4bit_nc SoA): the
    caches of its `copies` copies and its bf16 query fill, bit for bit."""
    words = layout.block_bytes // 4
    per_block = BS * HK
    caches = []
    for c in range(copies):
        i = np.arange(c * num_blocks * words, (c + 1) * num_blocks * words, dtype=np.uint64)
        with np.errstate(over="ignore"):
            w = hash32(np.uint64(1235) * np.uint64(0x9e3779b97f4a7c15) + i)  # seed 1234 + Preset::k4BitNc
        blocks = w.view(np.uint8).reshape(num_blocks, layout.block_bytes)
        m = np.arange(c * num_blocks * per_block, (c + 1) * num_blocks * per_block, dtype=np.uint64)
        fields = [fma(0.5, 1.5, unit(np.uint64(77) + np.uint64(3) * m)),
                  fma(0.01, 0.3, unit(np.uint64(78) + np.uint64(3) * m)),
                  np.float32(-1.2) * unit(np.uint64(79) + np.uint64(3) * m)]
        # i = blk * per_block + h * BS + t; FORMAT.md: fp16 [Hk][fields][block_size]
        meta = np.stack([f.reshape(num_blocks, HK, BS) for f in fields], axis=2).astype(np.float16)
        blocks[:, layout.meta_offset:layout.meta_offset + 2 * HK * 3 * BS] = meta.reshape(num_blocks, -1).view(np.uint8)
        caches.append(torch.from_numpy(blocks.reshape(layout.cache_shape(num_blocks))).cuda())
    return caches


def bench_gpu_query(rows):
    u = unit(np.uint64(9) + np.arange(rows * HQ * D, dtype=np.uint64))
    q = (u - np.float32(0.5)) * np.float32(3.4)
    return torch.from_numpy(q.reshape(rows, HQ, D)).cuda().to(torch.bfloat16)


def make(batch, seq, preset="turboquant_4bit_nc", copies_bytes=384 << 20, data="encoded"):
    """A layout, `copies` caches of batch x seq tokens, table, lens, bf16 query.

    data="encoded": K and V drawn from N(0, 1) in bf16 and stored by tq.encode, a query
    from N(0, 1). data="bench_gpu": the distributions bench_gpu fills its caches with
    (uniform code bytes; fp16 key norms in [0.5, 2), value scales in [0.01, 0.31), zeros
    in [-1.2, 0]; a uniform query in [-1.7, 1.7]), so that its times compare with
    bench_gpu's kernel for kernel: the online softmax rescales its accumulators when a
    tile raises the running maximum, which depends on the data.
    """
    layout = tq.Layout(preset, D, BS, HK)
    blocks_per_seq = -(-seq // BS)
    num_blocks = batch * blocks_per_seq + 1
    g = torch.Generator(device="cuda").manual_seed(1)
    copies = max(1, copies_bytes // (num_blocks * layout.block_bytes))

    def bench_gpu_cache():
        assert layout.layout == "soa" and layout.meta_fields == 3
        cache = torch.randint(0, 256, layout.cache_shape(num_blocks), generator=g, dtype=torch.uint8, device="cuda")
        blocks = cache.view(num_blocks, layout.block_bytes)
        meta = blocks[:, layout.meta_offset:layout.meta_offset + 2 * HK * 3 * BS].view(torch.float16)
        meta = meta.view(num_blocks, HK, 3, BS)  # FORMAT.md: fp16 [Hk][fields][block_size]
        u = torch.rand(num_blocks, HK, 3, BS, generator=g, device="cuda")
        meta[:, :, 0] = (0.5 + 1.5 * u[:, :, 0]).half()
        meta[:, :, 1] = (0.01 + 0.3 * u[:, :, 1]).half()
        meta[:, :, 2] = (-1.2 * u[:, :, 2]).half()
        return cache

    if data == "bench_gpu":  # every copy its own draw, as bench_gpu fills its copies
        caches = [bench_gpu_cache() for _ in range(copies)]
    elif data == "bench_gpu_bytes":  # bench_gpu's bytes themselves
        caches = bench_gpu_bytes(layout, num_blocks, copies)
    else:
        cache = torch.zeros(layout.cache_shape(num_blocks), dtype=torch.uint8, device="cuda")
        n = batch * blocks_per_seq * BS
        chunk = 1 << 16
        for start in range(0, n, chunk):  # encode in chunks (bounded K/V memory)
            m = min(chunk, n - start)
            k = torch.randn(m, HK, D, generator=g, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(m, HK, D, generator=g, device="cuda", dtype=torch.bfloat16)
            tq.encode(cache, k, v, torch.arange(start, start + m, device="cuda", dtype=torch.int64), layout)
        caches = [cache] + [cache.clone() for _ in range(copies - 1)]
    perm = torch.randperm(batch * blocks_per_seq, generator=torch.Generator().manual_seed(5))
    table = perm.to(torch.int32).reshape(batch, blocks_per_seq).cuda()
    lens = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
    if data == "bench_gpu_bytes":
        query = bench_gpu_query(batch)
    elif data == "bench_gpu":
        query = ((torch.rand(batch, HQ, D, generator=g, device="cuda") - 0.5) * 3.4).to(torch.bfloat16)
    else:
        query = torch.randn(batch, HQ, D, generator=g, device="cuda").to(torch.bfloat16)
    return layout, caches, table, lens, query


def overhead(calls):
    layout, caches, table, lens, query = make(1, 4096, copies_bytes=0)
    cache = caches[0]
    out, lse, ws = buffers(query)
    scale = D ** -0.5
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(20):
        tq.decode(query, cache, table, lens, layout, scale, SPLITS, out=out, lse=lse, workspace=ws)
    # C++ and Python calls alternate, so that both see the same host state (clocks, caches).
    cxx, py = [], []
    for _ in range(calls):
        cxx += ext._decode_call_ns(layout, query, cache, table, lens, scale, SPLITS, out, lse, "cuda", stream, ws, 1)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        tq.decode(query, cache, table, lens, layout, scale, SPLITS, out=out, lse=lse, workspace=ws)
        py.append(time.perf_counter_ns() - t0)
    py_alloc = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        tq.decode(query, cache, table, lens, layout, scale, SPLITS)
        py_alloc.append(time.perf_counter_ns() - t0)
    export = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        for t in (query, cache, table, lens, out, lse, ws):
            torch._C._to_dlpack(t)
        export.append(time.perf_counter_ns() - t0)
    torch.cuda.synchronize()
    med = lambda x: statistics.median(x) / 1e3  # noqa: E731
    print(f"torch tensors cross by route '{ext._array_route(torch.Tensor)}' (torch {torch.__version__}, exchange "
          f"table published: {hasattr(torch.Tensor, '__dlpack_c_exchange_api__')})")
    print(f"overhead parts: torch._C._to_dlpack of the 7 tensors {med(export):.2f} us")
    print(f"overhead 1x4096: C++ cuda::decode {med(cxx):.2f} us, turboquant.decode(out=, workspace=) {med(py):.2f} us "
          f"-> Python overhead {med(py) - med(cxx):.2f} us (median of {calls}); "
          f"without out/workspace {med(py_alloc):.2f} us; median of the paired differences "
          f"{statistics.median(p - c for p, c in zip(py, cxx)) / 1e3:.2f} us")
    return med(py) - med(cxx)


def buffers(query):
    """The decode's bf16 output, fp32 LSE and workspace for `query` ([B, HQ, D] on CUDA)."""
    out = torch.empty(query.shape, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(query.shape[:2], device="cuda")
    ws = torch.empty(tq.decode_workspace_bytes(query.shape[0], HQ, SPLITS, D), dtype=torch.uint8, device="cuda")
    return out, lse, ws


def event_us(call, reps, per_timing=1, spin=False):
    """Median over `reps` timings (after 3 warm-up ones) of `per_timing` calls of `call`
    launched back to back between two events, in us per call. spin: a spin kernel ahead
    of the first event (about 200 us per call timed, at the H200's clock) lasts until the
    host has queued every call, so the timing is the device's alone: it holds neither
    the host's launch time (which varied 2.4x between machines in run 6) nor device idle
    time while the host catches up. Without it the first event fires as soon as it is
    queued and the timing includes the host's time to launch the first call."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(reps + 3):
        if spin:
            torch.cuda._sleep(400_000 * per_timing)
        a.record()
        for _ in range(per_timing):
            call()
        b.record()
        b.synchronize()
        if i >= 3:
            ms.append(a.elapsed_time(b))
    return statistics.median(ms) * 1e3 / per_timing


def v2_call(layout, cache, table, lens, query, pi, centroids, out, lse):
    return triton_turboquant_decode_attention_v2(
        query, cache, table, lens, pi, centroids, D ** -0.5, 4, layout.key_packed_size, 4,
        layout.value_data_bytes + 4, key_fp8=False, norm_correction=True, PiT=pi, output_buf=out, lse_buf=lse,
        max_num_kv_splits=SPLITS)


def hadamard():
    h = np.ones((1, 1))
    while h.shape[0] < D:
        h = np.block([[h, h], [h, -h]])
    return torch.tensor(h / np.sqrt(D), dtype=torch.float32, device="cuda")


def host_us(call, reps, per_timing=20):
    """Median over `reps` timings (after 3 warm-up ones) of `per_timing` calls of `call`
    launched back to back, timed on the host from the first launch to the device's
    finishing the last, in us per call (probe_harness's `host` measurement)."""
    us = []
    for i in range(reps + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(per_timing):
            call()
        torch.cuda.synchronize()
        if i >= 3:
            us.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(us) / per_timing


def graph_of(caches, call, s=None):
    """A CUDA graph of `call(cache)` for every cache copy, captured on stream `s` (a new
    side stream by default)."""
    s = s or torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for c in caches:
            call(c)
    return g


def drop_in(batch, seq, reps, eager, data="encoded"):
    """Times of the drop-in and of the same turboquant.decode call, in us per call.

    The procedure is probe_harness's (PERFORMANCE.md, Python run 5): the eager calls
    first, before any graph exists; then one graph at a time, captured, timed on its
    own and released, never two graphs replayed alternately over the same caches."""
    layout, caches, table, lens, query = make(batch, seq, data=data)
    pi, centroids = hadamard(), torch.from_numpy(tq.codebook(4, D).centroids).cuda()
    out, lse, ws = buffers(query)
    calls = {"drop-in": lambda c: v2_call(layout, c, table, lens, query, pi, centroids, out, lse),
             "library": lambda c: tq.decode(query, c, table, lens, layout, D ** -0.5, SPLITS, out=out, lse=lse,
                                            workspace=ws)}
    for call in calls.values():
        for c in caches[:3]:
            call(c)
    torch.cuda.synchronize()
    r = {}
    if eager:
        for name, call in calls.items():
            one = lambda: call(caches[0])  # noqa: E731
            r[name + " eager alone"] = event_us(one, reps, spin=True)
            r[name + " eager"] = event_us(one, reps, per_timing=20, spin=True)
            r[name + " eager host"] = host_us(one, reps)
            print(f"{name} {batch}x{seq} {data} eager: one call alone {r[name + ' eager alone']:.1f} us; 20 back to "
                  f"back {r[name + ' eager']:.1f} us per call (device time), {r[name + ' eager host']:.1f} us (host "
                  f"clock, host launch included); "
                  f"median of {reps}")
    for name, call in calls.items():
        g = graph_of(caches, call)
        r[name + " graph"] = event_us(g.replay, reps, spin=True) / len(caches)
        # 20 replays back to back: bench_gpu --sustained's measurement.
        r[name + " graph b2b"] = event_us(g.replay, reps, per_timing=20, spin=True) / len(caches)
        del g
        torch.cuda.synchronize()
        print(f"{name} {batch}x{seq} {data} graph: {r[name + ' graph']:.2f} us per call one replay alone, "
              f"{r[name + ' graph b2b']:.2f} us 20 replays back to back ({len(caches)} cache copies, device time, "
              f"median of {reps})")
    print(f"ratio graph {batch}x{seq} ({data} data): drop-in / turboquant.decode = "
          f"{r['drop-in graph'] / r['library graph']:.3f}")
    if eager:
        print(f"ratio eager {batch}x{seq} ({data} data): drop-in / turboquant.decode = "
              f"{r['drop-in eager'] / r['library eager']:.3f}; drop-in eager / turboquant.decode graph in this process = "
              f"{r['drop-in eager'] / r['library graph']:.3f}")
    return r


def bench_gpu_rows(path):
    rows = {}
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) >= 2 and r[0].startswith("decode fast") and (len(r) < 5 or r[4] == "soa"):
                rows[" ".join(r[0].split())] = float(r[1])
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench-gpu-csv")
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--shapes", default="16x32768,1x4096", help="BxS list, in this order (eager calls at 16x32768)")
    p.add_argument("--data", default="encoded,bench_gpu,bench_gpu_bytes", help="data sets, in this order")
    p.add_argument("--no-overhead", action="store_true")
    o = p.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    if not o.no_overhead:
        overhead(o.calls)
    ref = bench_gpu_rows(o.bench_gpu_csv) if o.bench_gpu_csv else {}
    shapes = [tuple(map(int, x.split("x"))) for x in o.shapes.split(",")]
    for data in o.data.split(","):
        for batch, seq in shapes:
            eager = (batch, seq) == (16, 32768)
            r = drop_in(batch, seq, o.reps, eager=eager, data=data)
            name = f"decode fast 4bit_nc {batch}x{seq}"
            for ref_name, ref_what in ((name, "bench_gpu graph"), (name + " sustained", "bench_gpu sustained graph")):
                if ref_name not in ref:
                    continue
                for what in ("graph", "graph b2b", "eager", "eager host", "eager alone"):
                    if "drop-in " + what in r:
                        print(f"ratio {what} {name} ({data} data): drop-in {r['drop-in ' + what]:.1f} us / "
                              f"{ref_what} {ref[ref_name]:.1f} us = {r['drop-in ' + what] / ref[ref_name]:.3f}")


if __name__ == "__main__":
    main()
