"""decode/encode from many Python threads at once: the same bits as a serial run,
and the GIL is released while the library computes (no timing is asserted)."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import turboquant as tq
from conftest import bits, case_dirs, load

WORKERS = 8


@pytest.fixture(scope="module")
def cases(data_dir):
    dirs = case_dirs()
    if not dirs:
        pytest.skip("no case directories")
    return [load(d) for d in dirs]


def _decode(c, backend, threads):
    B, Hq, _ = c.query.shape
    lse = np.empty((B, Hq), np.float32)
    out = tq.decode(*c.decode_args(), scale=c.scale, num_splits=c.num_splits, lse=lse, backend=backend,
                    threads=threads)
    return out, lse


def _encode(c, backend, threads):
    cache = np.zeros(c.kv_cache.shape, np.uint8)
    return tq.encode(cache, c.keys, c.values, c.slot_mapping, c.layout, backend=backend, threads=threads)


@pytest.mark.parametrize("backend,threads", [("cpu-ref", 0), ("cpu", 0), ("cpu", 2)])
def test_concurrent_decode_equals_serial(cases, backend, threads):
    jobs = [c for c in cases for _ in range(2)]
    serial = [_decode(c, backend, threads) for c in jobs]
    with ThreadPoolExecutor(WORKERS) as pool:
        parallel = list(pool.map(lambda c: _decode(c, backend, threads), jobs))
    for (o1, l1), (o2, l2) in zip(serial, parallel):
        np.testing.assert_array_equal(bits(o1), bits(o2))
        np.testing.assert_array_equal(bits(l1), bits(l2))
    ref = [_decode(c, "cpu-ref", 1) for c in jobs]
    for (o1, _), (o2, _) in zip(ref, parallel):
        np.testing.assert_array_equal(bits(o1), bits(o2))


@pytest.mark.parametrize("backend,threads", [("cpu-ref", 0), ("cpu", 0), ("cpu", 3)])
def test_concurrent_encode_equals_serial(cases, backend, threads):
    jobs = [c for c in cases for _ in range(2)]
    serial = [_encode(c, backend, threads) for c in jobs]
    with ThreadPoolExecutor(WORKERS) as pool:
        parallel = list(pool.map(lambda c: _encode(c, backend, threads), jobs))
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


def test_concurrent_mixed_calls(cases):
    """decode, encode, dequantize and validate interleaved on 8 threads."""
    c = cases[0]
    want_out, _ = _decode(c, "cpu-ref", 1)
    want_cache = _encode(c, "cpu-ref", 1)
    want_k, _ = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout)

    def work(i):
        kind = i % 4
        if kind == 0:
            return np.array_equal(bits(_decode(c, "cpu", 0)[0]), bits(want_out))
        if kind == 1:
            return np.array_equal(_encode(c, "cpu", 0), want_cache)
        if kind == 2:
            return np.array_equal(tq.dequantize(c.kv_cache, c.slot_mapping, c.layout)[0], want_k)
        return tq.validate(c.expected_out, *c.decode_args(), scale=c.scale, num_splits=c.num_splits).ok

    with ThreadPoolExecutor(WORKERS) as pool:
        assert all(pool.map(work, range(32)))


def test_gil_released_during_decode(cases):
    """With a huge switch interval a Python thread only gets the GIL when another gives it
    up voluntarily. The helper thread wakes during a decode; if the decode released the
    GIL, the first Python line it runs sees the main thread still inside the call."""
    c = max(cases, key=lambda c: int(c.seq_lens.sum()) * c.query.shape[1] * c.layout.head_dim)
    state = {"inside": False}
    seen = []
    go = threading.Event()

    def helper():
        go.wait()
        seen.append(state["inside"])

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        t = threading.Thread(target=helper)
        t.start()
        state["inside"] = True
        go.set()
        for _ in range(200):  # until the OS has woken the helper during one of the calls
            state["inside"] = True
            tq.decode(*c.decode_args(), scale=c.scale, backend="cpu-ref", threads=1)
            state["inside"] = False
            if seen:
                break
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert seen == [True]
