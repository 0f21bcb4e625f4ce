"""turboquant.decode with multi-token rows (query_start_loc), sinks and sliding windows
on the shared vLLM multi-token cases (tests/data/vllm-multi): the golden model against
the cases' float64 reference; the backends without them refuse them."""

import glob
import os

import numpy as np
import pytest

import turboquant as tq

DATA = os.environ.get("TQ_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
MULTI = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(DATA, "vllm-multi", "*", "meta.json")))


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("path", MULTI, ids=os.path.basename)
def test_golden_decode_matches_the_float64_reference(path):
    c = tq.load_case(path)
    assert c.multi_token_or_sinks_or_window()
    out = c.decode()
    assert out.shape == c.reference_out_f64.shape
    assert rel_l2(out, c.reference_out_f64) <= 1e-6


@pytest.mark.parametrize("path", MULTI, ids=os.path.basename)
def test_rows_equal_single_token_decodes_with_synthetic_lengths(path):
    """Row i of sequence b is the one-token decode of a sequence of length
    seq_lens[b] - q_len_b + i + 1 (vLLM's expanded rows), bit for bit."""
    c = tq.load_case(path)
    if c.sinks is not None:
        pytest.skip("a sink adds to every row alike; covered by the C++ tests")
    out = c.decode()
    qsl = c.query_start_loc if c.query_start_loc is not None else np.arange(len(c.seq_lens) + 1, dtype=np.int32)
    rows, lens = [], []
    for b in range(len(c.seq_lens)):
        q_len = int(qsl[b + 1] - qsl[b])
        for i in range(q_len):
            rows.append(b)
            lens.append(int(c.seq_lens[b]) - q_len + i + 1)
    table = np.ascontiguousarray(c.block_table[rows])
    single = tq.decode(c.query, c.kv_cache, table, np.array(lens, np.int32), c.layout, c.scale, c.num_splits,
                       backend="cpu-ref", sliding_window=c.sliding_window)
    np.testing.assert_array_equal(out, single)


@pytest.mark.parametrize("path", MULTI, ids=os.path.basename)
@pytest.mark.parametrize("backend", [b.name for b in tq.backends() if b.available and b.name.startswith("cpu:")])
def test_cpu_backends_give_the_golden_bits_or_refuse(path, backend):
    c = tq.load_case(path)
    want = c.decode()
    try:
        got = c.decode(backend=backend)
    except ValueError as e:
        assert "not supported" in str(e) and ("query_start_loc" in str(e) or "sinks" in str(e)
                                             or "sliding_window" in str(e)), e
        return
    np.testing.assert_array_equal(got, want)


def test_bad_multi_token_arguments():
    c = tq.load_case(MULTI[0])
    assert c.validate(c.expected_out).ok  # vLLM's unified kernel (fp16): about 4.6e-4
    with pytest.raises(ValueError, match="query_start_loc"):
        tq.decode(*c.decode_args(), scale=c.scale, query_start_loc=c.query_start_loc[:-1], backend="cpu-ref")


@pytest.mark.parametrize("path", [p for p in MULTI if os.path.isfile(os.path.join(p, "expected_out.npy"))],
                         ids=os.path.basename)
def test_validate_repr_names_the_rows_as_tq_validate_does(path, run_tq):
    c = tq.load_case(path)
    v = c.validate(c.expected_out, output_name="expected_out.npy")
    r = run_tq("validate", path)
    assert r.returncode == 0, r.stderr
    want = "".join(l for l in r.stdout.splitlines(keepends=True) if not l.startswith(("case     ", "output   ")))
    # The one wording that differs: a case without K/V (tq) vs a call without them (Python).
    want = want.replace("the case has no keys.npy/values.npy/slot_mapping.npy", "no keys/values/slot_mapping given")
    assert repr(v) == want
    assert " query rows (q_len " in repr(v)
