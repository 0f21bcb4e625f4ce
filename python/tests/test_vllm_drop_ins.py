"""The vLLM drop-ins (turboquant.vllm) on torch tensors: the stores write the golden
bytes, the decodes (AoS, SoA v1/v2, the unified attention with query_start_loc and
sinks) give the golden rows on the shared vLLM cases, and what they cannot honour is a
ValueError. CUDA tensors when a GPU and a CUDA build exist, else CPU. Skipped without torch."""

import glob
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import turboquant as tq  # noqa: E402
from torch_cases import CASES, DATA, cuda, golden, on, rel_l2  # noqa: E402,F401


def vllm_args(case, device):
    """What vLLM's backend passes: bf16 K/V and query, Hadamard Pi (= PiT), fp32 centroids
    and midpoints, the preset's bit widths."""
    D = case.layout.head_dim
    h = np.ones((1, 1))
    while h.shape[0] < D:
        h = np.block([[h, h], [h, -h]])
    pi = torch.tensor(h / np.sqrt(D), dtype=torch.float32, device=device)
    bits = case.layout.value_bits if case.layout.fp8_keys else case.layout.key_bits
    cb = tq.codebook(bits, D)
    return dict(Pi=pi, centroids=torch.from_numpy(cb.centroids).to(device),
                midpoints=torch.from_numpy(cb.midpoints).to(device),
                mse_bits=0 if case.layout.fp8_keys else case.layout.key_bits,
                key_packed_size=case.layout.key_packed_size, value_quant_bits=case.layout.value_bits,
                key_fp8=case.layout.fp8_keys, norm_correction=case.layout.norm_correction)


def drop_in_device():
    return "cuda" if torch.cuda.is_available() and tq.cuda_built() else "cpu"


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_vllm_store_drop_ins_write_the_golden_bytes(path):
    from turboquant.vllm.ops import triton_turboquant_store as aos_store
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_store as soa_store
    case = tq.load_case(path)
    if case.layout.fp8_format == "e4b15":
        pytest.skip("e4b15 is written on GPUs below sm_89 only")
    device = drop_in_device()
    a = vllm_args(case, device)
    want = np.zeros_like(case.kv_cache)
    tq.encode(want, case.keys, case.values, case.slot_mapping, case.layout, backend="cpu-ref")
    cache = torch.zeros(case.kv_cache.shape, dtype=torch.uint8, device=device)
    key = torch.from_numpy(case.keys).to(device, torch.bfloat16)
    value = torch.from_numpy(case.values).to(device, torch.bfloat16)
    slots = torch.from_numpy(case.slot_mapping).to(device)
    if case.layout.layout == "aos":
        r = aos_store.triton_turboquant_store(key, value, cache, slots, a["Pi"], a["midpoints"], a["mse_bits"],
                                              a["key_packed_size"], a["value_quant_bits"], a["key_fp8"])
    else:
        r = soa_store.triton_turboquant_store(key, value, cache, slots, a["Pi"], a["midpoints"], a["mse_bits"],
                                              a["key_packed_size"], a["value_quant_bits"], a["key_fp8"],
                                              centroids=a["centroids"], norm_correction=a["norm_correction"])
    assert r is None
    np.testing.assert_array_equal(cache.cpu().numpy(), want)


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
@pytest.mark.parametrize("strict", [False, True], ids=["fast", "strict"])
def test_vllm_decode_drop_ins_on_cases(path, strict, monkeypatch):
    from turboquant.vllm.ops import triton_turboquant_decode as aos_decode
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_decode as soa_v1
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_decode_v2 as soa_v2
    case = tq.load_case(path)
    device = drop_in_device()
    if strict:
        monkeypatch.setenv("TURBOQUANT_VLLM_BACKEND", "cuda-strict")
    if case.layout.fp8_format == "e4b15" and (device == "cpu" or torch.cuda.get_device_capability() >= (8, 9)):
        pytest.skip("the drop-in reads e4b15 caches on GPUs below sm_89 only (vLLM's rule; CPU tensors: e4m3)")
    a = vllm_args(case, device)
    q, cache, table, lens = on(device, case)
    want = golden(case)
    B, Hq, D = q.shape
    calls = []
    if case.layout.layout == "aos":
        def aos(**kw):
            return aos_decode.triton_turboquant_decode_attention(
                q, cache, table, lens, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
                a["value_quant_bits"], key_fp8=a["key_fp8"], norm_correction=a["norm_correction"], PiT=a["Pi"],
                max_num_kv_splits=case.num_splits, **kw)
        calls.append(("aos", aos))
    else:
        def v1(**kw):
            return soa_v1.triton_turboquant_decode_attention(
                q, cache, table, lens, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
                a["value_quant_bits"], key_fp8=a["key_fp8"], norm_correction=a["norm_correction"], PiT=a["Pi"],
                max_num_kv_splits=case.num_splits, **kw)

        def v2(**kw):
            return soa_v2.triton_turboquant_decode_attention_v2(
                q, cache, table, lens, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
                a["value_quant_bits"], case.layout.value_data_bytes + 4, key_fp8=a["key_fp8"],
                norm_correction=a["norm_correction"], PiT=a["Pi"], max_num_kv_splits=case.num_splits, **kw)
        calls += [("v1", v1), ("v2", v2)]
    for name, call in calls:
        out = call()
        assert out.dtype == q.dtype and tuple(out.shape) == (B, Hq, D)
        got = out.float().cpu().numpy()
        if strict and device == "cuda" or device == "cpu":
            np.testing.assert_array_equal(got, want)
        bound = 1e-3  # every case, a05 included (finding F11: the fast kernel's centroid scale)
        assert rel_l2(got, case.expected_out) <= bound, name
        # vLLM's buffers: output_buf reused (AoS: only in the query's dtype), lse written.
        holder = type("Layer", (), {})()
        output_buf = torch.empty(B + 2, Hq, D, dtype=q.dtype, device=device)
        lse_buf = torch.full((B + 2, Hq), 123.0, device=device)
        out = call(output_buf=output_buf, lse_buf=lse_buf, buf_holder=holder)
        assert out.data_ptr() == output_buf.data_ptr()
        assert not bool((lse_buf[:B] == 123.0).any()) and bool((lse_buf[B:] == 123.0).all())
        assert not hasattr(holder, "_tq_output_buf")


@cuda
def test_vllm_decode_drop_in_on_two_streams_at_once():
    """Eager drop-in calls on two streams at once (vLLM's overlapped micro-batches) keep
    their own scratch: each stream's outputs are the ones it gets alone."""
    import threading
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_decode_v2 as soa_v2
    case = tq.load_case([c for c in CASES if "vllm-soa" in c][0])
    a = vllm_args(case, "cuda")
    q, cache, table, lens = on("cuda", case)
    queries = [q, (q * -0.5).contiguous()]  # two problems with different outputs

    def call(query):
        return soa_v2.triton_turboquant_decode_attention_v2(
            query, cache, table, lens, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
            a["value_quant_bits"], case.layout.value_data_bytes + 4, key_fp8=a["key_fp8"],
            norm_correction=a["norm_correction"], PiT=a["Pi"], max_num_kv_splits=case.num_splits)

    want = [call(x).cpu() for x in queries]
    got = [[], []]

    def worker(i):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(50):
                got[i].append(call(queries[i]))
        s.synchronize()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        for out in got[i]:
            torch.testing.assert_close(out.cpu(), want[i], rtol=0, atol=0)


def test_vllm_drop_ins_refuse_what_they_cannot_honour():
    from turboquant.vllm.ops import triton_turboquant_decode as aos_decode
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_decode as soa_v1
    case = tq.load_case([c for c in CASES if "a01" in c][0])
    q, cache, table, lens = on("cpu", case)
    a = vllm_args(case, "cpu")
    base = (q, cache, table, lens, a["Pi"], a["centroids"], case.scale)
    with pytest.raises(ValueError, match="norm_correction=False"):
        aos_decode.triton_turboquant_decode_attention(*base, 4, a["key_packed_size"], 4, norm_correction=False)
    with pytest.raises(ValueError, match="preset"):
        aos_decode.triton_turboquant_decode_attention(*base, 2, a["key_packed_size"], 4, norm_correction=True)
    with pytest.raises(ValueError, match="key_packed_size"):
        aos_decode.triton_turboquant_decode_attention(*base, 4, 60, 4, norm_correction=True)
    # A rotation that is not the Hadamard matrix is passed as the dense rotation: the result
    # follows it (here a sign flip of the first axis, applied to the query and the cache alike
    # would be needed to keep it; the decode must simply differ from the Hadamard one).
    other = a["Pi"].clone()
    other[0] = -other[0]
    out = aos_decode.triton_turboquant_decode_attention(*base[:4], other, a["centroids"], case.scale, 4,
                                                        a["key_packed_size"], 4, norm_correction=True, PiT=other)
    assert rel_l2(out.float().numpy(), golden(case)) > 1e-3
    # Centroids other than vLLM's are the codebook.
    shifted = a["centroids"] * 1.5
    out = aos_decode.triton_turboquant_decode_attention(*base[:5], shifted, case.scale, 4, a["key_packed_size"], 4,
                                                        norm_correction=True, PiT=a["Pi"])
    np.testing.assert_array_equal(out.float().numpy(), golden(case, centroids=shifted.numpy()))


SOA_CASES = [c for c in CASES if "vllm-soa" in c]
MULTI = sorted(os.path.dirname(m) for m in glob.glob(os.path.join(DATA, "vllm-multi", "*", "meta.json")))
SOA_MULTI = [p for p, c in ((p, tq.load_case(p)) for p in MULTI) if c.layout.layout == "soa" and c.sliding_window == 0]


@pytest.mark.parametrize("path", SOA_CASES[:2], ids=os.path.basename)
def test_vllm_soa_v1_sinks_enter_the_denominator_and_the_lse(path):
    """vLLM's v1 takes sinks: the golden model's sink (out) and vLLM's LSE, which counts it."""
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_decode as soa_v1
    case = tq.load_case(path)
    device = drop_in_device()
    a = vllm_args(case, device)
    q, cache, table, lens = on(device, case)
    B, Hq, _ = q.shape
    sinks = torch.linspace(-3.0, 6.0, Hq, dtype=torch.bfloat16)  # vLLM passes the model's dtype
    sinks_f32 = sinks.float().numpy()
    want_lse = np.zeros((B, Hq), np.float32)
    want = golden(case, sinks=sinks_f32, lse=want_lse)
    lse_buf = torch.empty(B, Hq, device=device)
    out = soa_v1.triton_turboquant_decode_attention(
        q, cache, table, lens, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
        a["value_quant_bits"], key_fp8=a["key_fp8"], norm_correction=a["norm_correction"], PiT=a["Pi"],
        max_num_kv_splits=case.num_splits, lse_buf=lse_buf, sinks=sinks.to(device))
    got = out.float().cpu().numpy()
    if device == "cpu":
        np.testing.assert_array_equal(got, want)
        lse_tol = dict(rtol=1e-6, atol=1e-5)  # the golden model's own LSE
    else:  # the fast kernel: scores with fp16 operands (H200: LSE within 9e-5 of the golden one)
        assert rel_l2(got, want) <= 1e-3
        lse_tol = dict(rtol=0, atol=1e-3)
    np.testing.assert_allclose(lse_buf.cpu().numpy(), np.logaddexp(want_lse, sinks_f32[None, :]), **lse_tol)
    assert rel_l2(got, golden(case)) > 1e-3  # the sinks changed the output


@pytest.mark.parametrize("path", SOA_MULTI, ids=os.path.basename)
@pytest.mark.parametrize("given_output", [False, True])
def test_vllm_unified_attention_on_the_multi_token_cases(path, given_output):
    """vLLM's unified launcher (query_start_loc, sinks) on the cases made with vLLM's own
    unified kernel: the golden model's rows, within vLLM's fp16 error of its output."""
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_unified_attention as unified
    case = tq.load_case(path)
    device = drop_in_device()
    a = vllm_args(case, device)
    q, cache, table, lens = on(device, case)  # float32 queries (vLLM's are fp16/bf16; the library takes all three)
    qsl = torch.from_numpy(case.query_start_loc).to(device)
    sinks = None if case.sinks is None else torch.from_numpy(case.sinks).to(device)
    want = case.decode(backend="cpu-ref", num_splits=32)
    output = torch.full(q.shape, 7.0, dtype=q.dtype, device=device) if given_output else None
    out = unified.triton_turboquant_unified_attention(
        q, cache, table, lens, qsl, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
        a["value_quant_bits"], case.layout.value_data_bytes + 4, key_fp8=a["key_fp8"],
        norm_correction=a["norm_correction"], output=output, max_query_len=16, sinks=sinks)
    if given_output:
        assert out.data_ptr() == output.data_ptr()
    assert out.dtype == q.dtype and tuple(out.shape) == tuple(q.shape)
    got = out.float().cpu().numpy()
    if device == "cpu":
        np.testing.assert_array_equal(got, want)
    else:
        assert rel_l2(got, want) <= 1e-3
    assert rel_l2(got, case.expected_out) <= 1e-3  # vLLM's kernel computes in fp16 tiles: about 4.6e-4
    assert case.validate(got).ok


def test_vllm_unified_attention_refuses_bad_arguments():
    from turboquant.vllm.ops.turboquant_soa import triton_turboquant_unified_attention as unified
    case = tq.load_case(SOA_MULTI[0])
    a = vllm_args(case, "cpu")
    q, cache, table, lens = on("cpu", case)
    qsl = torch.from_numpy(case.query_start_loc)
    args = (q, cache, table, lens, qsl, a["Pi"], a["centroids"], case.scale, a["mse_bits"], a["key_packed_size"],
            a["value_quant_bits"], 0)
    with pytest.raises(ValueError, match="sinks: 3 values"):
        unified.triton_turboquant_unified_attention(*args, norm_correction=True, sinks=torch.zeros(3))
    with pytest.raises(ValueError, match="output: shape"):
        unified.triton_turboquant_unified_attention(*args, norm_correction=True, output=torch.zeros(2, 2, 2))
    with pytest.raises(TypeError, match="query_start_loc: dtype int64 is not int32"):
        unified.triton_turboquant_unified_attention(*args[:4], qsl.to(torch.int64), *args[5:], norm_correction=True)
    with pytest.raises(ValueError, match="norm_correction=False"):
        unified.triton_turboquant_unified_attention(*args)
