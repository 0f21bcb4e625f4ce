"""The package on torch tensors (CPU and CUDA): the torch ops (opcheck,
torch.compile, CUDA graphs), decode/encode on CUDA against the golden model,
and dequantize and multi-token rows on CUDA (the vLLM drop-ins: test_vllm_drop_ins.py).
Skipped without torch; the CUDA tests also without a GPU or a CUDA build."""

import glob
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import turboquant as tq  # noqa: E402
import turboquant.torch as tqt  # noqa: E402
from torch_cases import CASES, DATA, cuda, golden, on, rel_l2  # noqa: E402,F401


# --- torch ops -------------------------------------------------------------------------------

def small_case():
    return tq.load_case(CASES[0])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_torch_decode_op_equals_golden_and_passes_opcheck(device):
    case = small_case()
    q, cache, table, lens = on(device, case)
    out = tqt.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits,
                     backend="cuda-strict" if device == "cuda" else None)
    np.testing.assert_array_equal(out.cpu().numpy(), golden(case))
    B, Hq, D = q.shape
    out = torch.empty(B, Hq, D, device=device)
    lse = torch.empty(B, Hq, device=device)
    fields = tqt._layout_fields(case.layout)
    torch.library.opcheck(torch.ops.turboquant.decode.default,
                          (q, cache, table, lens, *fields, case.scale, case.num_splits, out, lse, ""))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_torch_encode_op_equals_golden_and_passes_opcheck(device):
    case = small_case()
    want = np.zeros_like(case.kv_cache)
    tq.encode(want, case.keys, case.values, case.slot_mapping, case.layout, backend="cpu-ref")
    cache = torch.zeros(case.kv_cache.shape, dtype=torch.uint8, device=device)
    keys, values = (torch.from_numpy(a).to(device) for a in (case.keys, case.values))
    slots = torch.from_numpy(case.slot_mapping).to(device)
    tqt.encode(cache, keys, values, slots, case.layout)
    np.testing.assert_array_equal(cache.cpu().numpy(), want)
    torch.library.opcheck(torch.ops.turboquant.encode.default,
                          (cache, keys, values, slots, *tqt._layout_fields(case.layout), ""))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_torch_compile_fullgraph(device):
    case = small_case()
    q, cache, table, lens = on(device, case)
    layout = case.layout
    backend = "cuda-strict" if device == "cuda" else None

    @torch.compile(fullgraph=True)
    def attend(q, cache, table, lens):
        return tqt.decode(q * 1.0, cache, table, lens, layout, case.scale, case.num_splits, backend=backend) + 0.0

    np.testing.assert_array_equal(attend(q, cache, table, lens).cpu().numpy(), golden(case))


@cuda
def test_cuda_graph_capture_and_replay_with_new_contents():
    case = tq.load_case([c for c in CASES if "a01" in c][0])
    q, cache, table, lens = on("cuda", case)
    out = torch.empty(q.shape, device="cuda")
    ws = torch.empty(tq.decode_workspace_bytes(q.shape[0], q.shape[1], case.num_splits, case.layout.head_dim),
                     dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the capture
        tq.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits, out=out, workspace=ws,
                  backend="cuda-strict")
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tq.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits, out=out, workspace=ws,
                  backend="cuda-strict")
    q.mul_(-1.0)  # new contents, same buffers
    g.replay()
    torch.cuda.synchronize()
    flipped = tq.decode(-case.query, case.kv_cache, case.block_table, case.seq_lens, case.layout, case.scale,
                        case.num_splits, backend="cpu-ref")
    np.testing.assert_array_equal(out.cpu().numpy(), flipped)
    # The torch op allocates its workspace through torch: capturable as well.
    g2 = torch.cuda.CUDAGraph()
    out2 = torch.empty(q.shape, device="cuda")
    with torch.cuda.graph(g2):
        tqt.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits, out=out2, backend="cuda-strict")
    g2.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out2.cpu().numpy(), flipped)


@cuda
def test_capture_without_workspace_is_a_clear_error():
    case = small_case()
    q, cache, table, lens = on("cuda", case)
    out = torch.empty(q.shape, device="cuda")
    tq.decode(q, cache, table, lens, case.layout, case.scale, out=out)  # warm-up
    g = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="workspace"):
        with torch.cuda.graph(g):
            tq.decode(q, cache, table, lens, case.layout, case.scale, out=out)


# --- CUDA backends on the shared cases ------------------------------------------------------

@cuda
@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_cuda_decode_on_cases(path):
    case = tq.load_case(path)
    q, cache, table, lens = on("cuda", case)
    want = golden(case)
    lse = torch.empty(q.shape[:2], device="cuda")
    strict = tq.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits, lse=lse,
                       backend="cuda-strict")
    np.testing.assert_array_equal(strict.cpu().numpy(), want)
    want_lse = np.empty(case.query.shape[:2], np.float32)
    golden(case, lse=want_lse)
    np.testing.assert_array_equal(lse.cpu().numpy(), want_lse)
    fast = tq.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits)
    bound = 1e-3  # every case, a05 included (finding F11, fixed by the fast kernel's centroid scale)
    assert rel_l2(fast.cpu().numpy(), want) <= bound
    assert case.validate(fast).vs_golden.rel_l2 <= bound
    # on a non-default stream, bfloat16 query and output
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda")
        tq.decode(q.to(torch.bfloat16), cache, table, lens, case.layout, case.scale, case.num_splits, out=out)
    s.synchronize()
    assert rel_l2(out.float().cpu().numpy(), want) < 2e-2


@cuda
@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_cuda_encode_on_cases_equals_golden(path):
    case = tq.load_case(path)
    want = np.zeros_like(case.kv_cache)
    tq.encode(want, case.keys, case.values, case.slot_mapping, case.layout, backend="cpu-ref")
    cache = torch.zeros(case.kv_cache.shape, dtype=torch.uint8, device="cuda")
    for dtype in (torch.float32, torch.bfloat16):  # the case's K/V are bf16-exact
        cache.zero_()
        tq.encode(cache, torch.from_numpy(case.keys).to("cuda", dtype), torch.from_numpy(case.values).to("cuda", dtype),
                  torch.from_numpy(case.slot_mapping).cuda(), case.layout)
        np.testing.assert_array_equal(cache.cpu().numpy(), want)


ROUTE_PROBE = """
import sys, numpy as np, torch, turboquant as tq
from turboquant import _turboquant as ext
device = sys.argv[1]
print(ext._array_route(torch.Tensor))
c = tq.load_case(sys.argv[2])
args = [torch.from_numpy(a).to(device) for a in (c.query, c.kv_cache, c.block_table, c.seq_lens)]
want = tq.decode(*c.decode_args(), scale=c.scale, num_splits=c.num_splits, backend="cpu-ref")
s = torch.cuda.Stream() if device == "cuda" else None
if s is not None:
    with torch.cuda.stream(s):
        assert ext._current_stream(args[0]) == s.cuda_stream
        got = tq.decode(*args, c.layout, c.scale, c.num_splits, backend="cuda-strict")
    s.synchronize()
else:
    got = tq.decode(*args, c.layout, c.scale, c.num_splits, backend="cpu-ref")
np.testing.assert_array_equal(got.cpu().numpy(), want)
print("ok")
"""


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "capsule"])
def test_torch_tensors_cross_by_their_route_on_torchs_current_stream(device, exchange):
    """A torch.Tensor reaches the extension through torch's DLPack exchange table (torch >=
    2.10: no capsule), else (a torch without one; forced by TQ_PY_NO_EXCHANGE=1) as the
    capsule of torch's C exporter; either way a CUDA call runs on torch's current stream
    and gives the golden model's bits (docs/PERFORMANCE.md, the per-call overhead)."""
    import subprocess
    import sys
    published = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    if exchange and not published:
        pytest.skip(f"torch {torch.__version__} publishes no DLPack exchange table")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("TQ_PY_NO_EXCHANGE", None)
    if not exchange:
        env["TQ_PY_NO_EXCHANGE"] = "1"
    r = subprocess.run([sys.executable, "-c", ROUTE_PROBE, device, CASES[0]], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["exchange" if exchange else "torch-capsule", "ok"]


def test_tensors_torch_cannot_hand_over_are_named():
    """A tensor neither route can read (meta device, sparse): TypeError naming the argument
    with torch's reason, not nanobind's list of signatures."""
    case = small_case()
    q, cache, table, lens = on("cpu", case)
    with pytest.raises(TypeError, match=r"query: torch cannot hand this tensor over through DLPack \(BufferError"):
        tq.decode(q.to("meta"), cache, table, lens, case.layout)
    with pytest.raises(TypeError, match="lse: torch cannot hand"):
        tq.decode(q, cache, table, lens, case.layout, lse=torch.empty(q.shape[:2], device="meta"))
    keys = torch.from_numpy(case.keys)
    with pytest.raises(TypeError, match="keys: torch cannot hand"):
        tq.encode(torch.zeros(case.kv_cache.shape, dtype=torch.uint8), keys.to_sparse(),
                  torch.from_numpy(case.values), torch.from_numpy(case.slot_mapping), case.layout)
    with pytest.raises(TypeError, match="kv_cache: torch cannot hand"):
        tq.dequantize(cache.to("meta"), np.zeros(1, np.int64), case.layout)


@cuda
def test_cuda_bad_inputs():
    case = small_case()
    q, cache, table, lens = on("cuda", case)
    with pytest.raises(ValueError, match="one device"):
        tq.decode(q, cache, table.cpu(), lens, case.layout)
    with pytest.raises(ValueError, match="CPU array"):
        tq.decode(*case.decode_args(), backend="cuda")
    with pytest.raises(ValueError, match="cuda:0"):
        tq.decode(q, cache, table, lens, case.layout, backend="cpu")
    with pytest.raises(ValueError, match="C-contiguous"):
        tq.decode(q.transpose(0, 1).contiguous().transpose(0, 1), cache, table, lens, case.layout)
    out = torch.full(q.shape, 7.0, device="cuda")
    with pytest.raises(ValueError, match="workspace"):
        tq.decode(q, cache, table, lens, case.layout, out=out, workspace=torch.empty(16, dtype=torch.uint8,
                                                                                       device="cuda"))
    assert bool((out == 7.0).all())


@cuda
def test_cuda_concurrent_threads():
    from concurrent.futures import ThreadPoolExecutor
    case = small_case()
    q, cache, table, lens = on("cuda", case)
    want = golden(case)

    def one(_):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            out = tq.decode(q, cache, table, lens, case.layout, case.scale, case.num_splits, backend="cuda-strict")
        s.synchronize()
        return out.cpu().numpy()

    with ThreadPoolExecutor(8) as pool:
        for got in pool.map(one, range(32)):
            np.testing.assert_array_equal(got, want)


@cuda
@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_cuda_dequantize_equals_the_golden_model(path):
    case = tq.load_case(path)
    for basis in ("original", "rotated"):
        k, v = tq.dequantize(case.kv_cache, case.slot_mapping, case.layout, basis)
        ks, vs = tq.dequantize_sequences(case.kv_cache, case.block_table, case.seq_lens, case.layout, basis=basis)
        cache = torch.from_numpy(case.kv_cache).cuda()
        gk, gv = tq.dequantize(cache, torch.from_numpy(case.slot_mapping).cuda(), case.layout, basis)
        np.testing.assert_array_equal(gk.cpu().numpy(), k)
        np.testing.assert_array_equal(gv.cpu().numpy(), v)
        table, lens = torch.from_numpy(case.block_table).cuda(), torch.from_numpy(case.seq_lens).cuda()
        gks, gvs = tq.dequantize_sequences(cache, table, lens, case.layout, basis=basis)
        np.testing.assert_array_equal(gks.cpu().numpy(), ks)
        np.testing.assert_array_equal(gvs.cpu().numpy(), vs)
        hk, _ = tq.dequantize_sequences(cache, table, lens, case.layout, basis=basis, dtype="bfloat16")
        assert torch.equal(hk.cpu(), torch.from_numpy(ks).to(torch.bfloat16))  # numpy has no bfloat16
        tk, _ = tq.dequantize(cache, torch.from_numpy(case.slot_mapping).cuda(), case.layout, basis,
                              dtype=torch.bfloat16)  # a torch dtype names the same output
        assert tk.dtype == torch.bfloat16 and torch.equal(tk.cpu(), torch.from_numpy(k).to(torch.bfloat16))


MULTI = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(DATA, "vllm-multi", "*", "meta.json")))


@cuda
@pytest.mark.parametrize("path", MULTI, ids=os.path.basename)
@pytest.mark.parametrize("backend", ["cuda", "cuda-strict"])
def test_cuda_multi_token_rows_sinks_windows_match_the_golden_model(path, backend):
    """cuda-strict: the golden bits; cuda (fast, several rows per tile read): within 1e-3."""
    case = tq.load_case(path)
    want = case.decode(backend="cpu-ref")
    t = lambda a: None if a is None else torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    out = tq.decode(t(case.query), t(case.kv_cache), t(case.block_table), t(case.seq_lens), case.layout, case.scale,
                    case.num_splits, backend=backend, query_start_loc=t(case.query_start_loc), sinks=t(case.sinks),
                    sliding_window=case.sliding_window)
    got = out.cpu().numpy()
    if backend == "cuda-strict":
        np.testing.assert_array_equal(got, want)
    else:
        assert np.linalg.norm(got - want) <= 1e-3 * np.linalg.norm(want)
    assert case.validate(out).ok
