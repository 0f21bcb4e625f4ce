"""turboquant.encode: bytes equal to `tq encode`, input dtypes, slot_mapping
handling, and exactly the slots' bytes written."""

import numpy as np
import pytest

import turboquant as tq
from conftest import available_cpu_backends, case_params, load, rel_l2, slot_byte_mask

CASES = case_params()
ENCODE_BACKENDS = [b for b in available_cpu_backends() if b in ("cpu-ref", "cpu", "cpu:scalar", "cpu:avx2")]
CANARY = 0xA5


def _encode(c, backend="cpu-ref", fill=0, keys=None, values=None, slots=None, **kw):
    cache = np.full(c.kv_cache.shape, fill, np.uint8)
    r = tq.encode(cache, c.keys if keys is None else keys, c.values if values is None else values,
                  c.slot_mapping if slots is None else slots, c.layout, backend=backend, **kw)
    assert r is cache
    return cache


@pytest.fixture(scope="module")
def tq_encoded(run_tq, tmp_path_factory):
    """tq_encoded(path) -> the cache `tq encode CASE --out FILE` writes (cached)."""
    done = {}

    def get(path):
        if path not in done:
            out = tmp_path_factory.mktemp("tq_encode") / "cache.npy"
            r = run_tq("encode", path, "--out", out)
            assert r.returncode == 0, r.stderr
            done[path] = np.load(out)
        return done[path]
    return get


@pytest.mark.parametrize("backend", ENCODE_BACKENDS)
@pytest.mark.parametrize("path", CASES)
def test_encode_equals_tq_encode(path, backend, tq_encoded):
    c = load(path)
    want = tq_encoded(path)
    assert want.shape == c.kv_cache.shape and want.dtype == np.uint8
    got = _encode(c, backend, centroids=c.centroids)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("path", CASES)
def test_encode_backends_agree_and_default_codebook(path):
    c = load(path)
    ref = _encode(c, "cpu-ref")
    np.testing.assert_array_equal(_encode(c, "cpu-ref", centroids=c.centroids), ref)
    for backend in ENCODE_BACKENDS:
        np.testing.assert_array_equal(_encode(c, backend, threads=2), ref)
    np.testing.assert_array_equal(_encode(c, None), ref)


@pytest.mark.parametrize("path", CASES)
def test_encode_agrees_with_vllm_store(path):
    """Against the bytes vLLM's own store wrote (docs/ARITHMETIC.md §4: about 0.1% of
    vLLM's codes differ by one step, from its approximate division)."""
    c = load(path)
    ours = _encode(c)
    assert np.mean(ours == c.kv_cache) > 0.998
    k, v = tq.dequantize(ours, c.slot_mapping, c.layout)
    k_vllm, v_vllm = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout)
    assert rel_l2(k, k_vllm) < 1e-4
    assert np.mean(v != v_vllm) < 0.003
    assert rel_l2(v, v_vllm) < 0.03


@pytest.mark.parametrize("path", CASES)
def test_encode_writes_only_its_slots(path):
    c = load(path)
    cache = _encode(c, "cpu", fill=CANARY)
    mask = slot_byte_mask(c.layout, c.kv_cache.shape[0], c.slot_mapping)
    assert np.all(cache[~mask] == CANARY)
    np.testing.assert_array_equal(cache[mask], _encode(c)[mask])
    assert np.all(_encode(c)[~mask] == 0)


@pytest.mark.parametrize("backend", ENCODE_BACKENDS)
@pytest.mark.parametrize("path", case_params("vllm-soa")[:1] + case_params("vllm-aos")[1:2])
def test_encode_negative_slots_skipped(path, backend):
    c = load(path)
    slots = c.slot_mapping.copy()
    slots[::3] = -1
    slots[1] = -12345
    kept = slots >= 0
    cache = _encode(c, backend, fill=CANARY, slots=slots)
    mask = slot_byte_mask(c.layout, c.kv_cache.shape[0], slots)
    assert np.all(cache[~mask] == CANARY)
    full = _encode(c, "cpu-ref")
    np.testing.assert_array_equal(cache[mask], full[mask])
    # the same as storing only the kept tokens
    only = _encode(c, "cpu-ref", fill=CANARY, keys=np.ascontiguousarray(c.keys[kept]),
                   values=np.ascontiguousarray(c.values[kept]), slots=np.ascontiguousarray(slots[kept]))
    np.testing.assert_array_equal(cache, only)


def test_encode_all_slots_negative_writes_nothing(small_case):
    c = small_case
    cache = _encode(c, "cpu", fill=CANARY, slots=np.full(c.slot_mapping.shape, -1, np.int64))
    assert np.all(cache == CANARY)


@pytest.mark.parametrize("backend", ENCODE_BACKENDS)
def test_encode_int32_slot_mapping(small_case, backend):
    c = small_case
    want = _encode(c, "cpu-ref")
    np.testing.assert_array_equal(_encode(c, backend, slots=c.slot_mapping.astype(np.int32)), want)


@pytest.mark.parametrize("backend", ENCODE_BACKENDS)
@pytest.mark.parametrize("path", case_params("vllm-soa")[:2] + case_params("vllm-aos")[1:2])
def test_encode_float16_input(path, backend):
    """float16 K/V are widened exactly: the same bytes as their float32 values."""
    c = load(path)
    k16, v16 = c.keys.astype(np.float16), c.values.astype(np.float16)
    got = _encode(c, backend, keys=k16, values=v16)
    want = _encode(c, "cpu-ref", keys=k16.astype(np.float32), values=v16.astype(np.float32))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, _encode(c, "cpu-ref")) or np.array_equal(k16.astype(np.float32), c.keys)


def test_encode_later_store_overwrites(small_case):
    """Storing a slot twice leaves the second token's bytes (vLLM overwrites in place)."""
    c = small_case
    n = 5
    first = _encode(c, "cpu", keys=np.ascontiguousarray(c.keys[:n]), values=np.ascontiguousarray(c.values[:n]),
                    slots=np.ascontiguousarray(c.slot_mapping[:n]))
    tq.encode(first, np.ascontiguousarray(c.keys[n:2 * n]), np.ascontiguousarray(c.values[n:2 * n]),
              np.ascontiguousarray(c.slot_mapping[:n]), c.layout)
    direct = _encode(c, "cpu", keys=np.ascontiguousarray(c.keys[n:2 * n]),
                     values=np.ascontiguousarray(c.values[n:2 * n]), slots=np.ascontiguousarray(c.slot_mapping[:n]))
    np.testing.assert_array_equal(first, direct)


def test_encode_then_decode_round_trip(small_case):
    """Our store followed by our decode is within the format error of the float64 attention."""
    c = small_case
    cache = _encode(c)
    out = tq.decode(c.query, cache, c.block_table, c.seq_lens, c.layout, scale=c.scale)
    v = tq.validate(out, c.query, cache, c.block_table, c.seq_lens, c.layout, scale=c.scale, keys=c.keys,
                    values=c.values, slot_mapping=c.slot_mapping)
    assert v.ok and v.vs_golden.rel_l2 == 0.0
    assert v.format_error.rel_l2 < 0.35


def test_encode_zero_tokens(small_case):
    """Storing no tokens is a valid call that writes nothing."""
    c = small_case
    shape = (0, c.layout.num_kv_heads, c.layout.head_dim)
    cache = np.full(c.kv_cache.shape, CANARY, np.uint8)
    tq.encode(cache, np.zeros(shape, np.float32), np.zeros(shape, np.float32), np.zeros(0, np.int64), c.layout)
    assert np.all(cache == CANARY)
