"""The bad-input table: every argument check of decode, encode, dequantize and
validate raises TypeError/ValueError naming the argument, and nothing is written."""

import numpy as np
import pytest

import turboquant as tq

OUT_CANARY = 7.25


def named(name):
    """A message naming `name` that is not nanobind's generic 'incompatible function
    arguments' (which lists every parameter name)."""
    return rf"(?s)^(?!.*incompatible function arguments).*{name}"

CACHE_CANARY = 0xA5


def _noncontig(a):
    """A non-C-contiguous array with the values (and shape) of `a`."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    v = wide[..., ::2]
    assert not v.flags.c_contiguous
    return v


# --- decode ---

def _decode_args(c):
    B, Hq, D = c.query.shape
    return dict(query=c.query.copy(), kv_cache=c.kv_cache.copy(), block_table=c.block_table.copy(),
                seq_lens=c.seq_lens.copy(), layout=c.layout, scale=c.scale, num_splits=c.num_splits,
                out=np.full((B, Hq, D), OUT_CANARY, np.float32), lse=np.full((B, Hq), OUT_CANARY, np.float32))


def _bad_table(c):
    t = c.block_table.copy()
    t[1, 0] = c.kv_cache.shape[0]
    return t


def _negative_table(c):
    t = c.block_table.copy()
    t[0, 0] = -1
    return t


def _long_seq(c):
    s = c.seq_lens.copy()
    s[0] = c.block_table.shape[1] * c.layout.block_size + 1
    return s


def _negative_seq(c):
    s = c.seq_lens.copy()
    s[1] = -1
    return s


def _nan_query(c):
    q = c.query.copy()
    q[1, 2, 3] = np.nan
    return q


def _inf_query(c):
    q = c.query.copy()
    q[0, 0, 0] = np.inf
    return q


def _shape(a, axis, delta=1):
    shape = list(a.shape)
    shape[axis] += delta
    return np.zeros(shape, a.dtype)


DECODE_BAD = [
    # (id, override(case) -> dict, exception, message regex)
    ("query-float64", lambda c: {"query": c.query.astype(np.float64)}, TypeError, "query.*float64"),
    ("query-int32", lambda c: {"query": c.query.astype(np.int32)}, TypeError, "query"),
    ("kv_cache-int8", lambda c: {"kv_cache": c.kv_cache.view(np.int8)}, TypeError, "kv_cache.*int8"),
    ("kv_cache-float32", lambda c: {"kv_cache": c.kv_cache.astype(np.float32)}, TypeError, "kv_cache"),
    ("block_table-int64", lambda c: {"block_table": c.block_table.astype(np.int64)}, TypeError, "block_table.*int64"),
    ("seq_lens-int64", lambda c: {"seq_lens": c.seq_lens.astype(np.int64)}, TypeError, "seq_lens.*int64"),
    ("seq_lens-float", lambda c: {"seq_lens": c.seq_lens.astype(np.float32)}, TypeError, "seq_lens"),
    ("out-float64", lambda c: {"out": np.full(c.query.shape, OUT_CANARY)}, TypeError, "out.*float64"),
    ("lse-float16", lambda c: {"lse": np.zeros(c.query.shape[:2], np.float16)}, TypeError, "lse.*float16"),
    ("query-2d", lambda c: {"query": c.query[0].copy()}, ValueError, r"query.*2 dimensions.*\[B, Hq, head_dim\]"),
    ("query-head_dim", lambda c: {"query": _shape(c.query, 2, 16)}, ValueError, "query.*dimension 2 .head_dim."),
    ("kv_cache-3d", lambda c: {"kv_cache": c.kv_cache[0].copy()}, ValueError, "kv_cache.*3 dimensions"),
    ("kv_cache-slot_bytes", lambda c: {"kv_cache": _shape(c.kv_cache, 3, 2)}, ValueError,
     "kv_cache.*slot_bytes_aligned"),
    ("kv_cache-block_size", lambda c: {"kv_cache": _shape(c.kv_cache, 1)}, ValueError, "kv_cache.*block_size"),
    ("kv_cache-heads", lambda c: {"kv_cache": _shape(c.kv_cache, 2)}, ValueError, "kv_cache.*num_kv_heads"),
    ("block_table-B", lambda c: {"block_table": _shape(c.block_table, 0)}, ValueError, r"block_table.*\(B\)"),
    ("block_table-1d", lambda c: {"block_table": c.block_table[0].copy()}, ValueError, "block_table.*1 dimensions"),
    ("seq_lens-B", lambda c: {"seq_lens": _shape(c.seq_lens, 0)}, ValueError, r"seq_lens.*\(B\)"),
    ("out-Hq", lambda c: {"out": _shape(c.query, 1).astype(np.float32)}, ValueError, r"out.*dimension 1 \(Hq\)"),
    ("lse-shape", lambda c: {"lse": np.zeros(c.query.shape, np.float32)}, ValueError, "lse.*3 dimensions"),
    ("query-noncontig", lambda c: {"query": _noncontig(c.query)}, ValueError, "query.*C-contiguous"),
    ("kv_cache-noncontig", lambda c: {"kv_cache": _noncontig(c.kv_cache)}, ValueError, "kv_cache.*C-contiguous"),
    ("block_table-noncontig", lambda c: {"block_table": _noncontig(c.block_table)}, ValueError,
     "block_table.*C-contiguous"),
    ("seq_lens-noncontig", lambda c: {"seq_lens": _noncontig(c.seq_lens)}, ValueError, "seq_lens.*C-contiguous"),
    ("out-noncontig", lambda c: {"out": _noncontig(np.full(c.query.shape, OUT_CANARY, np.float32))}, ValueError,
     "out.*C-contiguous"),
    ("query-list", lambda c: {"query": c.query.tolist()}, TypeError, "query"),
    ("kv_cache-list", lambda c: {"kv_cache": c.kv_cache.tolist()}, TypeError, "kv_cache"),
    ("block_table-list", lambda c: {"block_table": c.block_table.tolist()}, TypeError, "block_table"),
    ("seq_lens-list", lambda c: {"seq_lens": c.seq_lens.tolist()}, TypeError, "seq_lens"),
    ("layout-str", lambda c: {"layout": "4bit_nc"}, TypeError, "layout"),
    ("layout-other", lambda c: {"layout": tq.Layout("4bit_nc", 64, 32, 4)}, ValueError, "kv_cache"),
    ("block-out-of-range", lambda c: {"block_table": _bad_table(c)}, ValueError,
     lambda c: rf"block_table\[1\]\[0\] = {c.kv_cache.shape[0]}\b"),
    ("block-negative", lambda c: {"block_table": _negative_table(c)}, ValueError, r"block_table\[0\]\[0\] = -1"),
    ("seq_lens-too-long", lambda c: {"seq_lens": _long_seq(c)}, ValueError, r"seq_lens\[0\]"),
    ("seq_lens-negative", lambda c: {"seq_lens": _negative_seq(c)}, ValueError, r"seq_lens\[1\] = -1"),
    ("query-nan", lambda c: {"query": _nan_query(c)}, ValueError, "query"),
    ("query-inf", lambda c: {"query": _inf_query(c)}, ValueError, "query"),
    ("backend-unknown", lambda c: {"backend": "gpu"}, ValueError, "backend = 'gpu'"),
    ("backend-cuda", lambda c: {"backend": "cuda"}, ValueError, "backend = 'cuda'.*CPU array"),
    ("backend-cuda-strict", lambda c: {"backend": "cuda-strict"}, ValueError, "cuda-strict"),
    ("threads-negative", lambda c: {"threads": -1}, ValueError, "threads = -1"),
    ("num_splits-zero", lambda c: {"num_splits": 0}, ValueError, "num_splits"),
    ("num_splits-negative", lambda c: {"num_splits": -4}, ValueError, "num_splits"),
    ("num_splits-huge", lambda c: {"num_splits": 1 << 40}, (ValueError, TypeError, OverflowError), "num_splits"),
    ("threads-huge", lambda c: {"threads": 1 << 40}, (ValueError, TypeError, OverflowError), "threads"),
    ("out-readonly", lambda c: {"out": _readonly(np.full(c.query.shape, OUT_CANARY, np.float32))},
     (ValueError, TypeError), "out.*(read-only|writable)"),
    ("scale-nan", lambda c: {"scale": float("nan")}, ValueError, "scale"),
    ("workspace-cpu", lambda c: {"workspace": np.zeros(1024, np.uint8)}, ValueError, "workspace"),
    ("centroids-size", lambda c: {"centroids": np.zeros(3, np.float32)}, ValueError, "centroids"),
    ("centroids-unsorted", lambda c: {"centroids": c.centroids[::-1].copy()}, ValueError, "centroids"),
    ("rotation-shape", lambda c: {"rotation": np.eye(c.layout.head_dim + 1, dtype=np.float32)}, ValueError,
     "rotation"),
]


@pytest.mark.parametrize("make,exc,msg", [pytest.param(*r[1:], id=r[0]) for r in DECODE_BAD])
def test_decode_bad_input(small_case, make, exc, msg):
    c = small_case
    args = _decode_args(c)
    args.update(make(c))
    out, lse = args["out"], args["lse"]
    out_before = np.array(out, copy=True) if isinstance(out, np.ndarray) else None
    lse_before = np.array(lse, copy=True) if isinstance(lse, np.ndarray) else None
    with pytest.raises(exc, match=named(msg(c) if callable(msg) else msg)):
        tq.decode(**args)
    if out_before is not None:
        np.testing.assert_array_equal(out, out_before)
    if lse_before is not None:
        np.testing.assert_array_equal(lse, lse_before)


@pytest.mark.parametrize("backend", ["cpu-ref", "cpu"])
def test_decode_nan_query_allowed_without_check(small_case, backend):
    c = small_case
    args = _decode_args(c)
    args["query"] = _nan_query(c)
    tq.decode(**args, backend=backend, check_finite=False)
    ref = _decode_args(c)
    ref["query"] = _nan_query(c)
    tq.decode(**ref, backend="cpu-ref", check_finite=False)
    np.testing.assert_array_equal(args["out"].view(np.uint32), ref["out"].view(np.uint32))
    clean = tq.decode(*c.decode_args(), scale=c.scale, num_splits=c.num_splits, backend="cpu-ref")
    np.testing.assert_array_equal(args["out"][0], clean[0])  # the other sequence is untouched by the NaN


def test_decode_hq_not_multiple_of_hk(small_case):
    c = small_case
    args = _decode_args(c)
    B, Hq, D = c.query.shape
    args["query"] = np.zeros((B, Hq + 1, D), np.float32)
    args["out"] = np.full((B, Hq + 1, D), OUT_CANARY, np.float32)
    args["lse"] = None
    with pytest.raises(ValueError, match="Hq|num_q_heads"):
        tq.decode(**args)
    assert np.all(args["out"] == OUT_CANARY)


def test_decode_numpy_cannot_allocate_bfloat16_but_any_out_works(small_case):
    c = small_case
    out = tq.decode(*c.decode_args(), scale=c.scale)
    assert out.dtype == np.float32


# --- encode ---

def _encode_args(c):
    return dict(kv_cache=np.full(c.kv_cache.shape, CACHE_CANARY, np.uint8), keys=c.keys.copy(),
                values=c.values.copy(), slot_mapping=c.slot_mapping.copy(), layout=c.layout)


def _with(a, index, value):
    a = a.copy()
    a[index] = value
    return a


ENCODE_BAD = [
    ("kv_cache-int8", lambda c: {"kv_cache": np.full(c.kv_cache.shape, CACHE_CANARY, np.uint8).view(np.int8)},
     TypeError, "kv_cache.*int8"),
    ("keys-float64", lambda c: {"keys": c.keys.astype(np.float64)}, TypeError, "keys.*float64"),
    ("values-float64", lambda c: {"values": c.values.astype(np.float64)}, TypeError, "values.*float64"),
    ("values-dtype-differs", lambda c: {"values": c.values.astype(np.float16)}, TypeError, "values.*keys"),
    ("slot_mapping-float", lambda c: {"slot_mapping": c.slot_mapping.astype(np.float64)}, TypeError, "slot_mapping"),
    ("slot_mapping-uint64", lambda c: {"slot_mapping": c.slot_mapping.astype(np.uint64)}, TypeError, "slot_mapping"),
    ("keys-2d", lambda c: {"keys": c.keys[0].copy()}, ValueError, "keys.*2 dimensions"),
    ("keys-heads", lambda c: {"keys": _shape(c.keys, 1)}, ValueError, r"keys.*\(num_kv_heads\)"),
    ("keys-head_dim", lambda c: {"keys": _shape(c.keys, 2, 16)}, ValueError, r"keys.*\(head_dim\)"),
    ("values-tokens", lambda c: {"values": _shape(c.values, 0)}, ValueError, r"values.*\(num_tokens\)"),
    ("slot_mapping-tokens", lambda c: {"slot_mapping": _shape(c.slot_mapping, 0, -1)}, ValueError,
     r"slot_mapping.*\(num_tokens\)"),
    ("kv_cache-slot_bytes", lambda c: {"kv_cache": np.full(_shape(c.kv_cache, 3, 2).shape, CACHE_CANARY, np.uint8)},
     ValueError, "kv_cache.*slot_bytes_aligned"),
    ("keys-noncontig", lambda c: {"keys": _noncontig(c.keys)}, ValueError, "keys.*C-contiguous"),
    ("values-noncontig", lambda c: {"values": _noncontig(c.values)}, ValueError, "values.*C-contiguous"),
    ("slot_mapping-noncontig", lambda c: {"slot_mapping": _noncontig(c.slot_mapping)}, ValueError,
     "slot_mapping.*C-contiguous"),
    ("kv_cache-noncontig", lambda c: {"kv_cache": _noncontig(np.full(c.kv_cache.shape, CACHE_CANARY, np.uint8))},
     ValueError, "kv_cache.*C-contiguous"),
    ("kv_cache-readonly", lambda c: {"kv_cache": _readonly(np.full(c.kv_cache.shape, CACHE_CANARY, np.uint8))},
     (ValueError, TypeError), "kv_cache.*(read-only|writable)"),
    ("keys-list", lambda c: {"keys": c.keys.tolist()}, TypeError, "keys"),
    ("values-list", lambda c: {"values": c.values.tolist()}, TypeError, "values"),
    ("slot_mapping-list", lambda c: {"slot_mapping": c.slot_mapping.tolist()}, TypeError, "slot_mapping"),
    ("kv_cache-list", lambda c: {"kv_cache": c.kv_cache.tolist()}, TypeError, "kv_cache"),
    ("slot-out-of-range", lambda c: {"slot_mapping": _with(c.slot_mapping, 3, c.kv_cache.shape[0] *
                                                           c.layout.block_size)}, ValueError, r"slot_mapping\[3\]"),
    ("keys-nan", lambda c: {"keys": _with(c.keys, (5, 0, 1), np.nan)}, ValueError, "keys"),
    ("values-inf", lambda c: {"values": _with(c.values, (6, 1, 2), np.inf)}, ValueError, "values"),
    ("backend-unknown", lambda c: {"backend": "cpu:neon"}, ValueError, "backend = 'cpu:neon'"),
    ("backend-cuda", lambda c: {"backend": "cuda"}, ValueError, "backend = 'cuda'.*CPU array"),
    ("threads-negative", lambda c: {"threads": -2}, ValueError, "threads = -2"),
    ("centroids-size", lambda c: {"centroids": np.zeros(5, np.float32)}, ValueError, "centroids"),
    ("rotation-dtype", lambda c: {"rotation": np.eye(c.layout.head_dim)}, TypeError, "rotation"),
]


def _readonly(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("make,exc,msg", [pytest.param(*r[1:], id=r[0]) for r in ENCODE_BAD])
def test_encode_bad_input(small_case, make, exc, msg):
    c = small_case
    args = _encode_args(c)
    args.update(make(c))
    cache = args["kv_cache"]
    before = np.array(cache, copy=True) if isinstance(cache, np.ndarray) else None
    with pytest.raises(exc, match=named(msg)):
        tq.encode(**args)
    if before is not None:
        np.testing.assert_array_equal(cache, before)
        assert np.all(np.asarray(cache).view(np.uint8) == CACHE_CANARY)


def test_encode_nan_skipped_slot_is_not_an_error(small_case):
    """A NaN in a token whose slot is negative is never read."""
    c = small_case
    args = _encode_args(c)
    args["keys"][0, 0, 0] = np.nan
    args["slot_mapping"][0] = -1
    tq.encode(**args)


# --- dequantize ---

DEQUANTIZE_BAD = [
    ("kv_cache-int8", lambda c: {"kv_cache": c.kv_cache.view(np.int8)}, TypeError, "kv_cache"),
    ("slots-float", lambda c: {"slots": c.slot_mapping.astype(np.float32)}, TypeError, "slots"),
    ("slots-2d", lambda c: {"slots": c.slot_mapping.reshape(2, -1)}, ValueError, "slots.*2 dimensions"),
    ("slots-list", lambda c: {"slots": c.slot_mapping.tolist()}, TypeError, "slots"),
    ("kv_cache-list", lambda c: {"kv_cache": c.kv_cache.tolist()}, TypeError, "kv_cache"),
    ("slots-noncontig", lambda c: {"slots": _noncontig(c.slot_mapping)}, ValueError, "slots.*C-contiguous"),
    ("kv_cache-noncontig", lambda c: {"kv_cache": _noncontig(c.kv_cache)}, ValueError, "kv_cache.*C-contiguous"),
    ("kv_cache-shape", lambda c: {"kv_cache": _shape(c.kv_cache, 3, 2)}, ValueError, "kv_cache.*slot_bytes_aligned"),
    ("slot-out-of-range", lambda c: {"slots": np.array([0, c.kv_cache.shape[0] * c.layout.block_size])}, ValueError,
     r"slots\[1\]"),
    ("slot-negative", lambda c: {"slots": np.array([0, -1])}, ValueError, r"slots\[1\]"),
    ("basis", lambda c: {"basis": "hadamard"}, ValueError, "basis = 'hadamard'"),
    ("backend-unknown", lambda c: {"backend": "fast"}, ValueError, "backend = 'fast'"),
    ("backend-cuda", lambda c: {"backend": "cuda"}, ValueError, "cuda"),
    ("threads-negative", lambda c: {"threads": -1}, ValueError, "threads = -1"),
    ("layout-none", lambda c: {"layout": None}, TypeError, "layout"),
]


@pytest.mark.parametrize("make,exc,msg", [pytest.param(*r[1:], id=r[0]) for r in DEQUANTIZE_BAD])
def test_dequantize_bad_input(small_case, make, exc, msg):
    c = small_case
    args = dict(kv_cache=c.kv_cache, slots=c.slot_mapping[:8].copy(), layout=c.layout)
    args.update(make(c))
    with pytest.raises(exc, match=named(msg)):
        tq.dequantize(**args)


# --- validate ---

def _validate_args(c):
    return dict(output=c.expected_out, query=c.query, kv_cache=c.kv_cache, block_table=c.block_table,
                seq_lens=c.seq_lens, layout=c.layout, scale=c.scale, num_splits=c.num_splits)


VALIDATE_BAD = [
    ("output-shape", lambda c: {"output": c.expected_out[:, :-1].copy()}, ValueError, r"output.*\(Hq\)"),
    ("query-head_dim", lambda c: {"query": _shape(c.query, 2, 16)}, ValueError, "query.*head_dim"),
    ("kv_cache-shape", lambda c: {"kv_cache": _shape(c.kv_cache, 3, 2)}, ValueError, "kv_cache.*slot_bytes_aligned"),
    ("kv_cache-int8", lambda c: {"kv_cache": c.kv_cache.view(np.int8)}, TypeError, "kv_cache"),
    ("block_table-B", lambda c: {"block_table": _shape(c.block_table, 0)}, ValueError, "block_table"),
    ("output-list", lambda c: {"output": c.expected_out.tolist()}, TypeError, "output"),
    ("query-list", lambda c: {"query": c.query.tolist()}, TypeError, "query"),
    ("block-out-of-range", lambda c: {"block_table": _bad_table(c)}, ValueError, r"block_table\[1\]\[0\]"),
    ("seq_lens-too-long", lambda c: {"seq_lens": _long_seq(c)}, ValueError, r"seq_lens\[0\]"),
    ("query-nan", lambda c: {"query": _nan_query(c)}, ValueError, "query"),
    ("rtol-negative", lambda c: {"rtol": -1e-3}, ValueError, "rtol"),
    ("rtol-nan", lambda c: {"rtol": float("nan")}, ValueError, "rtol"),
    ("threads-negative", lambda c: {"threads": -1}, ValueError, "threads = -1"),
    ("num_splits-zero", lambda c: {"num_splits": 0}, ValueError, "num_splits"),
    ("keys-only", lambda c: {"keys": c.keys}, ValueError, "keys, values and slot_mapping"),
    ("keys-shape", lambda c: {"keys": c.keys[:-1], "values": c.values, "slot_mapping": c.slot_mapping}, ValueError,
     "values|slot_mapping"),
    ("reference-shape", lambda c: {"reference_out_f64": c.reference_out_f64[:1]}, ValueError, "reference_out_f64"),
    ("layout-str", lambda c: {"layout": "soa"}, TypeError, "layout"),
]


@pytest.mark.parametrize("make,exc,msg", [pytest.param(*r[1:], id=r[0]) for r in VALIDATE_BAD])
def test_validate_bad_input(small_case, make, exc, msg):
    c = small_case
    args = _validate_args(c)
    args.update(make(c))
    with pytest.raises(exc, match=named(msg)):
        tq.validate(**args)
