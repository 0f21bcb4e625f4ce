"""Every shared vLLM case: load_case, decode on every CPU backend (bit-exact with
cpu-ref), validate (the numbers of `tq validate`), dequantize against the case's
float64 oracle."""

import json

import numpy as np
import pytest

import turboquant as tq
from conftest import (available_cpu_backends, bits, case_params, load, reference_attention, rel_l2,
                      sequence_slots)

CASES = case_params()
SOA_CASES = case_params("vllm-soa")
BACKENDS = available_cpu_backends()


def _decode(c, backend, **kw):
    B, Hq, _ = c.query.shape
    lse = np.full((B, Hq), 7.0, np.float32)
    out = tq.decode(*c.decode_args(), scale=c.scale, num_splits=c.num_splits, lse=lse, backend=backend, **kw)
    return out, lse


@pytest.mark.parametrize("path", CASES)
def test_load_case(path):
    c = load(path)
    with open(path / "meta.json") as f:
        meta = json.load(f)
    assert c.meta == meta
    assert c.layout.preset == meta["preset"]
    assert (c.layout.head_dim, c.layout.block_size, c.layout.num_kv_heads) == \
        (meta["head_dim"], meta["block_size"], meta["num_kv_heads"])
    assert c.layout.layout == meta.get("layout", "soa")
    if c.layout.fp8_keys:
        assert c.layout.fp8_format == meta.get("fp8_format", "e4m3")
    assert c.scale == meta["scale"] and c.num_splits == meta["num_kv_splits"] and c.num_q_heads == meta["num_q_heads"]
    assert c.source == meta["source"]
    B = c.seq_lens.shape[0]
    assert c.query.shape == (B, meta["num_q_heads"], meta["head_dim"]) and c.query.dtype == np.float32
    assert c.kv_cache.dtype == np.uint8 and c.kv_cache.shape == c.layout.cache_shape(c.kv_cache.shape[0])
    assert c.block_table.dtype == np.int32 and c.seq_lens.dtype == np.int32 and c.slot_mapping.dtype == np.int64
    assert c.block_table.shape[0] == B
    assert c.expected_out.shape == c.query.shape and c.reference_out_f64.dtype == np.float64
    np.testing.assert_array_equal(c.slot_mapping, np.load(path / "slot_mapping.npy"))
    assert c.decode_args()[4] is c.layout
    r = repr(c)
    assert str(path) in r and repr(c.layout) in r and "'expected_out'" in r


@pytest.mark.parametrize("path", CASES)
def test_decode_matches_vllm(path):
    c = load(path)
    out, lse = _decode(c, "cpu-ref")
    assert out.dtype == np.float32 and out.shape == c.query.shape
    assert rel_l2(out, c.expected_out) < 1e-5
    assert rel_l2(out, c.reference_out_f64) < 1e-5
    np.testing.assert_allclose(lse, c.expected_lse, atol=5e-5, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", CASES)
def test_cpu_backends_bitexact(path, backend):
    c = load(path)
    ref_out, ref_lse = _decode(c, "cpu-ref")
    out, lse = _decode(c, backend)
    np.testing.assert_array_equal(bits(out), bits(ref_out))
    np.testing.assert_array_equal(bits(lse), bits(ref_lse))


@pytest.mark.parametrize("path", CASES)
def test_decode_default_backend_and_threads(path):
    c = load(path)
    ref_out, ref_lse = _decode(c, "cpu-ref")
    for kw in ({}, {"threads": 1}, {"threads": 3}):
        out, lse = _decode(c, None, **kw)
        np.testing.assert_array_equal(bits(out), bits(ref_out))
        np.testing.assert_array_equal(bits(lse), bits(ref_lse))


def test_num_splits_changes_bits_not_result(small_case):
    c = small_case
    a = tq.decode(*c.decode_args(), scale=c.scale, num_splits=1, backend="cpu-ref")
    b = tq.decode(*c.decode_args(), scale=c.scale, num_splits=32, backend="cpu-ref")
    assert rel_l2(a, b) < 1e-6
    for backend in BACKENDS:
        np.testing.assert_array_equal(
            bits(tq.decode(*c.decode_args(), scale=c.scale, num_splits=1, backend=backend)), bits(a))


def test_default_scale_is_inverse_sqrt_head_dim(small_case):
    c = small_case
    a = tq.decode(*c.decode_args(), backend="cpu-ref")
    b = tq.decode(*c.decode_args(), scale=1 / np.sqrt(c.layout.head_dim), backend="cpu-ref")
    np.testing.assert_array_equal(bits(a), bits(b))
    d = tq.decode(*c.decode_args(), scale=2 / np.sqrt(c.layout.head_dim), backend="cpu-ref")
    assert not np.array_equal(a, d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_float16_query_and_out(small_case, backend):
    c = small_case
    q16 = c.query.astype(np.float16)
    ref = tq.decode(q16.astype(np.float32), *c.decode_args()[1:], scale=c.scale, backend="cpu-ref")
    got = tq.decode(q16, *c.decode_args()[1:], scale=c.scale, backend=backend)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(bits(got), bits(ref))
    out16 = np.zeros(c.query.shape, np.float16)
    r = tq.decode(*c.decode_args(), scale=c.scale, out=out16, backend=backend)
    assert r is out16
    want = tq.decode(*c.decode_args(), scale=c.scale, backend="cpu-ref").astype(np.float16)
    np.testing.assert_array_equal(bits(out16), bits(want))


def test_decode_returns_given_out(small_case):
    c = small_case
    out = np.full(c.query.shape, 3.0, np.float32)
    assert tq.decode(*c.decode_args(), scale=c.scale, out=out) is out
    assert rel_l2(out, c.expected_out) < 1e-5


def test_decode_empty_sequence(small_case):
    c = small_case
    lens = c.seq_lens.copy()
    lens[0] = 0
    B, Hq, D = c.query.shape
    lse = np.zeros((B, Hq), np.float32)
    out = tq.decode(c.query, c.kv_cache, c.block_table, lens, c.layout, scale=c.scale, lse=lse)
    assert np.all(np.isfinite(out[1:]))
    full = tq.decode(*c.decode_args(), scale=c.scale)
    np.testing.assert_array_equal(bits(out[1:]), bits(full[1:]))


# --- validate ---

def _validate(c, output, **kw):
    return tq.validate(output, *c.decode_args(), scale=c.scale, num_splits=c.num_splits, keys=c.keys,
                       values=c.values, slot_mapping=c.slot_mapping, reference_out_f64=c.reference_out_f64, **kw)


ROW_KEYS = ["vs_golden", "vs_f64_dequant", "golden_vs_f64_dequant", "f64_dequant_vs_f64_original", "vs_f64_original",
            "f64_dequant_vs_reference_out_f64"]


@pytest.mark.parametrize("path", CASES)
def test_validate_expected_out(path):
    c = load(path)
    v = _validate(c, c.expected_out)
    assert v.ok and bool(v)
    assert v.rtol == 1e-3
    assert [r.key for r in v.rows] == ROW_KEYS
    assert v.vs_golden.rel_l2 < 1e-5
    assert v.vs_f64_dequant.rel_l2 < 1e-5
    assert v.golden_vs_f64_dequant.rel_l2 < 1e-5
    assert 0.05 < v.format_error.rel_l2 < 0.35  # README: the quantization costs 0.10 to 0.29
    assert v.vs_f64_original is not None
    text = repr(v)
    assert "PASS" in text and "FAIL" not in text and c.layout.preset in text
    assert str(v) == text


@pytest.mark.parametrize("path", CASES)
def test_validate_equals_tq_validate(path, tq_json):
    c = load(path)
    v = _validate(c, c.expected_out)
    j = tq_json("validate", path)
    assert j["pass"] is True and j["rtol"] == v.rtol
    for row in v.rows:
        want = j[row.key]
        assert row.rel_l2 == want["rel_l2"], row.key
        assert row.max_abs == want["max_abs"], row.key
        assert row.cosine == want["cosine"], row.key
        assert row.non_finite == want["non_finite"], row.key
        assert tuple(row.max_at) == (want["max_abs_at"]["sequence"], want["max_abs_at"]["head"],
                                     want["max_abs_at"]["dim"]), row.key
        assert (row.worst_seq, row.worst_head, row.worst_rel_l2) == \
            (want["worst_head"]["sequence"], want["worst_head"]["head"], want["worst_head"]["rel_l2"]), row.key


@pytest.mark.parametrize("path", SOA_CASES)
def test_validate_vllm_v2_out(path, run_tq):
    c = load(path)
    v2 = path / "vllm_v2_out.npy"
    if not v2.is_file():
        pytest.skip("no vllm_v2_out.npy")
    out = np.load(v2)
    v = _validate(c, out, output_name="vllm_v2_out")
    good = c.layout.value_bits == 3  # README: right for 3bit_nc only
    assert v.ok == good
    text = repr(v)
    if good:
        assert 1e-5 < v.vs_golden.rel_l2 < 1e-3 and "PASS" in text and "FAIL" not in text
    else:
        assert v.vs_golden.rel_l2 > 0.5 and "FAIL" in text and "PASS" not in text
    assert "vllm_v2_out" in text
    r = run_tq("validate", path, "--output", "vllm_v2_out.npy")
    assert r.returncode == (0 if good else 1)


def test_validate_rtol(small_case):
    c = small_case
    v = _validate(c, c.expected_out)
    assert not _validate(c, c.expected_out, rtol=v.vs_golden.rel_l2 / 2).ok
    assert _validate(c, c.expected_out, rtol=v.vs_golden.rel_l2).ok


def test_validate_without_optional_arrays(small_case):
    c = small_case
    v = tq.validate(c.expected_out, *c.decode_args(), scale=c.scale, num_splits=c.num_splits)
    full = _validate(c, c.expected_out)
    assert v.ok and v.format_error is None and v.vs_f64_original is None
    assert v.format_error_note
    assert v.vs_golden.rel_l2 == full.vs_golden.rel_l2


def test_validate_any_float_dtype(small_case):
    c = small_case
    out16 = c.expected_out.astype(np.float16)
    v = _validate(c, out16)
    assert v.ok
    assert v.vs_golden.rel_l2 == _validate(c, out16.astype(np.float32)).vs_golden.rel_l2
    assert v.vs_golden.rel_l2 > _validate(c, c.expected_out).vs_golden.rel_l2


def test_validate_flags_a_wrong_output(small_case):
    c = small_case
    bad = c.expected_out.copy()
    bad[0, 0, :] *= -1
    v = _validate(c, bad)
    assert not v.ok and v.vs_golden.worst_seq == 0 and v.vs_golden.worst_head == 0
    assert "FAIL" in repr(v)
    nan = c.expected_out.copy()
    nan[1, 2, 3] = np.nan
    v = _validate(c, nan)
    assert not v.ok and v.vs_golden.non_finite == 1


# --- dequantize ---

@pytest.mark.parametrize("path", CASES)
def test_dequantize_oracle(path):
    """float64 attention over the dequantized K/V: the case's reference_out_f64."""
    c = load(path)
    ks, vs = [], []
    for s in range(c.seq_lens.shape[0]):
        k, v = tq.dequantize(c.kv_cache, sequence_slots(c, s), c.layout)
        assert k.dtype == np.float32 and k.shape == (int(c.seq_lens[s]), c.layout.num_kv_heads, c.layout.head_dim)
        assert v.shape == k.shape and v.dtype == np.float32
        ks.append(k)
        vs.append(v)
    out, lse = reference_attention(c.query, ks, vs, c.scale)
    assert rel_l2(out, c.reference_out_f64) < 1e-6
    _, dec_lse = _decode(c, "cpu-ref")
    np.testing.assert_allclose(lse, dec_lse, atol=2e-5, rtol=0)


@pytest.mark.parametrize("path", CASES)
def test_dequantize_near_original(path):
    c = load(path)
    k, v = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout)
    assert k.shape == c.keys.shape
    assert rel_l2(k, c.keys) < 0.25
    assert rel_l2(v, c.values) < 0.25


@pytest.mark.parametrize("path", CASES)
def test_dequantize_bases(path):
    c = load(path)
    slots = c.slot_mapping[:40]
    k_orig, v_orig = tq.dequantize(c.kv_cache, slots, c.layout, "original")
    k_rot, v_rot = tq.dequantize(c.kv_cache, slots, c.layout, basis="rotated")
    np.testing.assert_array_equal(v_rot, v_orig)
    if c.layout.fp8_keys:
        np.testing.assert_array_equal(k_rot, k_orig)  # FP8 keys are stored unrotated
        return
    assert not np.array_equal(k_rot, k_orig)
    # The rotation is orthogonal (Hadamard / sqrt(D)): norms agree, and its inverse maps back.
    np.testing.assert_allclose(np.linalg.norm(k_rot, axis=-1), np.linalg.norm(k_orig, axis=-1), rtol=1e-5)
    D = c.layout.head_dim
    H = np.array([[1.0]])
    while H.shape[0] < D:
        H = np.block([[H, H], [H, -H]])
    H /= np.sqrt(D)
    back = k_rot.astype(np.float64) @ H
    np.testing.assert_allclose(back, k_orig, atol=1e-5 * np.abs(k_orig).max())


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequantize_backends_agree(small_case, backend):
    c = small_case
    ref = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, backend="cpu-ref")
    got = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, backend=backend, threads=2)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_dequantize_slot_order_and_int32(small_case):
    c = small_case
    slots = c.slot_mapping[:10]
    k, v = tq.dequantize(c.kv_cache, slots, c.layout)
    kr, vr = tq.dequantize(c.kv_cache, slots[::-1].copy(), c.layout)
    np.testing.assert_array_equal(kr, k[::-1])
    k32, v32 = tq.dequantize(c.kv_cache, slots.astype(np.int32), c.layout)
    np.testing.assert_array_equal(k32, k)


def test_dequantize_zero_slots(small_case):
    """No slots is a valid request (numpy calls an empty array C-contiguous)."""
    c = small_case
    k0, v0 = tq.dequantize(c.kv_cache, np.zeros(0, np.int64), c.layout)
    assert k0.shape == v0.shape == (0, c.layout.num_kv_heads, c.layout.head_dim)


def test_dequantize_custom_centroids(small_case):
    c = small_case
    slots = c.slot_mapping[:8]
    k, _ = tq.dequantize(c.kv_cache, slots, c.layout, "rotated", centroids=c.centroids)
    k2, _ = tq.dequantize(c.kv_cache, slots, c.layout, "rotated", centroids=c.centroids * np.float32(2))
    if c.layout.key_norm_stored == "raw":  # AoS: the decode divides by ||c|| per token
        np.testing.assert_allclose(k2, k, rtol=1e-5)
    else:  # SoA: ||k|| / ||c|| was folded in at store
        np.testing.assert_allclose(k2, 2 * k, rtol=1e-6)


def _tq_text_without_case_and_output(stdout):
    """tq validate's text less its ``case`` and ``output`` lines (the repr has no paths)."""
    return "".join(l for l in stdout.splitlines(keepends=True) if not l.startswith(("case     ", "output   ")))


@pytest.mark.parametrize("path", CASES)
def test_validate_repr_is_tq_validates_text(path, run_tq):
    c = load(path)
    v = _validate(c, c.expected_out, output_name="expected_out.npy")
    r = run_tq("validate", path)
    assert r.returncode == 0, r.stderr
    assert repr(v) == _tq_text_without_case_and_output(r.stdout)
