"""turboquant.dequantize's output dtypes and turboquant.dequantize_sequences (the
block-table form of vLLM's continuation prefill) on the shared vLLM cases."""

import glob
import os

import numpy as np
import pytest

import turboquant as tq

DATA = os.environ.get("TQ_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
CASES = sorted(os.path.dirname(p) for s in ("vllm-soa", "vllm-aos")
               for p in glob.glob(os.path.join(DATA, s, "*", "meta.json")))


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
@pytest.mark.parametrize("basis", ["original", "rotated"])
def test_sequences_hold_the_list_rows_and_zeros_past_each_length(path, basis):
    c = tq.load_case(path)
    k, v = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, basis)
    ks, vs = tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, basis=basis)
    assert ks.shape == (len(c.seq_lens), c.layout.num_kv_heads, c.block_table.shape[1] * c.layout.block_size,
                        c.layout.head_dim)
    offset = 0  # slot_mapping is in sequence-major order (the cases' README)
    for b, n in enumerate(int(x) for x in c.seq_lens):
        np.testing.assert_array_equal(ks[b, :, :n], k[offset:offset + n].transpose(1, 0, 2))
        np.testing.assert_array_equal(vs[b, :, :n], v[offset:offset + n].transpose(1, 0, 2))
        assert not ks[b, :, n:].any() and not vs[b, :, n:].any()
        offset += n


@pytest.mark.parametrize("path", CASES[:3], ids=os.path.basename)
def test_float16_output_is_the_float32_one_rounded(path):
    c = tq.load_case(path)
    k, v = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout)
    k16, v16 = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype="float16")
    assert k16.dtype == np.float16
    np.testing.assert_array_equal(k16, k.astype(np.float16))
    np.testing.assert_array_equal(v16, v.astype(np.float16))
    ks, _ = tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, max_seq=int(c.seq_lens.max()),
                                    dtype="float16")
    assert ks.shape[2] == int(c.seq_lens.max())


def test_dtype_is_a_name_or_a_numpy_dtype():
    c = tq.load_case(CASES[0])
    want, _ = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype="float16")
    for dtype in (np.float16, np.dtype("float16")):
        k, _ = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype=dtype)
        assert k.dtype == np.float16
        np.testing.assert_array_equal(k, want)
        ks, _ = tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, dtype=dtype)
        assert ks.dtype == np.float16
    k32, _ = tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype=np.float32)
    assert k32.dtype == np.float32


@pytest.mark.parametrize("dtype", ["int8", "half", "fp16", np.float64, np.int32, None, 3])
def test_other_dtypes_are_refused_by_name(dtype):
    c = tq.load_case(CASES[0])
    with pytest.raises(ValueError, match=r"dtype = .* is not one of 'float32', 'float16', 'bfloat16'"):
        tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype=dtype)
    with pytest.raises(ValueError, match=r"dtype = .* is not one of"):
        tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, dtype=dtype)


def test_bad_inputs_name_the_argument():
    c = tq.load_case(CASES[0])
    with pytest.raises(ValueError, match="max_seq"):
        tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, max_seq=1)
    with pytest.raises(ValueError, match="max_seq = -2"):
        tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, max_seq=-2)
    with pytest.raises(TypeError, match="block_table"):
        tq.dequantize_sequences(c.kv_cache, c.block_table.astype(np.int64), c.seq_lens, c.layout)
    bad = c.block_table.copy()
    bad[0, 0] = 10**6
    with pytest.raises(ValueError, match=r"block_table\[0\]\[0\]"):
        tq.dequantize_sequences(c.kv_cache, bad, c.seq_lens, c.layout)
    with pytest.raises(ValueError, match="basis"):
        tq.dequantize_sequences(c.kv_cache, c.block_table, c.seq_lens, c.layout, basis="up")
    with pytest.raises(TypeError, match="dtype = 'bfloat16': numpy has no bfloat16"):
        tq.dequantize(c.kv_cache, c.slot_mapping, c.layout, dtype="bfloat16")
