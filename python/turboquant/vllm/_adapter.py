"""What every vLLM drop-in shares: the Layout a launcher's arguments describe,
the checks that a rotation / codebook is one the library can honour, the
decode workspace, and vLLM's output-buffer rules."""

from __future__ import annotations

import functools
import math
import os
import weakref

import numpy as np
import torch

import turboquant as _tq

_MSE_PRESETS = {(4, 4): "turboquant_4bit_nc", (3, 4): "turboquant_k3v4_nc", (3, 3): "turboquant_3bit_nc"}


@functools.lru_cache(maxsize=None)
def _use_fp8_e4b15(device: int = 0) -> int:
    """vLLM's rule: Triton float8e4b15 FP8 keys below sm_89 (A100), float8e4nv (e4m3) from sm_89 on."""
    if not torch.cuda.is_available():
        return 0
    return 1 if torch.cuda.get_device_capability(device) < (8, 9) else 0


def preset_name(mse_bits, value_quant_bits, key_fp8, norm_correction=True):
    """The vLLM preset a launcher's bit widths name; ValueError for any other combination."""
    if key_fp8:
        if int(value_quant_bits) != 4:
            raise ValueError(f"value_quant_bits = {value_quant_bits} with key_fp8=True: turboquant_k8v4 has 4-bit "
                             "values; no other FP8-key preset exists")
        return "turboquant_k8v4"
    name = _MSE_PRESETS.get((int(mse_bits), int(value_quant_bits)))
    if name is None:
        raise ValueError(f"mse_bits = {mse_bits}, value_quant_bits = {value_quant_bits}: not a vLLM TurboQuant preset "
                         "(4/4 turboquant_4bit_nc, 3/4 turboquant_k3v4_nc, 3/3 turboquant_3bit_nc, or key_fp8 with 4)")
    if not norm_correction:
        raise ValueError(f"norm_correction=False with {mse_bits}-bit Lloyd-Max keys: every vLLM preset with "
                         f"Lloyd-Max keys ({name}) uses norm correction; the library has no format without it")
    return name


@functools.lru_cache(maxsize=None)
def _layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format):
    return _tq.Layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format)


def layout_for(kv_cache, head_dim, preset, layout, key_packed_size):
    """The Layout of vLLM's [num_blocks, block_size, Hk, slot] uint8 cache, checked against it."""
    if kv_cache.dim() != 4:
        raise ValueError(f"kv_cache: shape {list(kv_cache.shape)} has {kv_cache.dim()} dimensions, expected 4 "
                         "[num_blocks, block_size, num_kv_heads, slot_size_aligned]")
    fp8 = "e4m3"
    if preset == "turboquant_k8v4" and kv_cache.is_cuda and _use_fp8_e4b15(kv_cache.device.index or 0):
        fp8 = "e4b15"
    lay = _layout(preset, int(head_dim), int(kv_cache.shape[1]), int(kv_cache.shape[2]), layout, fp8)
    if int(kv_cache.shape[3]) != lay.slot_bytes_aligned:
        raise ValueError(f"kv_cache: last dimension {kv_cache.shape[3]} is not {preset}'s slot size "
                         f"{lay.slot_bytes_aligned} at head_dim {head_dim}")
    if int(key_packed_size) != lay.key_packed_size:
        raise ValueError(f"key_packed_size = {key_packed_size} is not {preset}'s {lay.key_packed_size} at head_dim "
                         f"{head_dim}")
    return lay


class _Memo:
    """Per-tensor answers (is this PiT the Hadamard matrix? are these centroids vLLM's?)
    kept while the tensor object lives and is not modified in place, so a launcher
    does not copy the same tensor to the host on every call (vLLM passes one shared Pi
    and centroids per layer)."""

    def __init__(self):
        self._entries = {}

    def get(self, tensor, key, compute):
        k = (id(tensor), key)
        hit = self._entries.get(k)
        if hit is not None and hit[0]() is tensor and hit[1] == tensor._version:
            return hit[2]
        value = compute()
        self._entries[k] = (weakref.ref(tensor), tensor._version, value)
        if len(self._entries) > 4096:  # dead entries of freed tensors
            self._entries = {a: b for a, b in self._entries.items() if b[0]() is not None}
        return value


_memo = _Memo()


def _sylvester_signs(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def _is_hadamard(m, head_dim):
    h = m.detach().float().cpu().numpy()
    if h.shape != (head_dim, head_dim) or head_dim & (head_dim - 1):
        return False
    magnitude = 1.0 / math.sqrt(head_dim)
    return bool(np.all(np.abs(h * _sylvester_signs(head_dim) - magnitude) <= 2e-7 * magnitude))


def rotation(Pi, PiT, head_dim):
    """None when the rotation is vLLM's Sylvester Hadamard / sqrt(D) (the library's exact
    FWHT); else the dense PiT (fp32 [D, D], contiguous, on its device) to pass as
    rotation=."""
    m = PiT if PiT is not None else Pi
    if m is None:
        raise ValueError("Pi: None (and PiT None): the Lloyd-Max presets need the rotation")
    if _memo.get(m, ("hadamard", head_dim), lambda: _is_hadamard(m, head_dim)):
        return None
    dense = m if PiT is not None else Pi.T
    return dense.float().contiguous()


def centroids_for(centroids, bits, head_dim):
    """None when `centroids` are vLLM's table for (bits, head_dim); else their host copy."""
    if centroids is None:
        return None

    def differs():
        c = centroids.detach().float().cpu().numpy()
        mine = _tq.codebook(bits, head_dim).centroids
        return None if c.shape == mine.shape and np.array_equal(c, mine) else c

    return _memo.get(centroids, ("centroids", bits, head_dim), differs)


def check_midpoints(midpoints, centroids, bits, head_dim):
    """The codebook the store needs, or a ValueError when `midpoints` are not the ones
    the library derives (from `centroids` when given, else from vLLM's table)."""
    base = centroids_for(centroids, bits, head_dim) if centroids is not None else None
    table = base if base is not None else _tq.codebook(bits, head_dim).centroids

    def consistent():
        m = midpoints.detach().float().cpu().numpy()
        c = np.asarray(table, dtype=np.float32)
        derived = ((c[:-1] + c[1:]) / np.float32(2)).astype(np.float32)
        return m.shape == derived.shape and np.array_equal(m, derived)

    if midpoints is not None and not _memo.get(midpoints, ("midpoints", bits, head_dim, id(table)), consistent):
        raise ValueError(f"midpoints: not (c[i] + c[i+1]) / 2 of {'the given centroids' if base is not None else 'vLLM codebook'} "
                         f"for {bits} bits at head_dim {head_dim}; the library derives midpoints from centroids: "
                         "pass centroids= (turboquant.encode) for another codebook")
    return base


def decode_setup(query, kv_cache, layout, Pi, PiT, centroids, mse_bits, key_packed_size, value_quant_bits, key_fp8,
                 norm_correction):
    """A decode launcher's (Layout, codebook, rotation): the preset its bit widths name,
    checked against the cache, and what of vLLM's rotation / centroids must be passed on."""
    preset = preset_name(mse_bits, value_quant_bits, key_fp8, norm_correction or key_fp8)
    D = int(query.shape[-1])
    lay = layout_for(kv_cache, D, preset, layout, key_packed_size)
    if key_fp8:
        return lay, None, None
    return lay, centroids_for(centroids, lay.key_bits, D), rotation(Pi, PiT, D)


def backend():
    """The decode backend for CUDA tensors: TURBOQUANT_VLLM_BACKEND, default 'cuda' (fast)."""
    return os.environ.get("TURBOQUANT_VLLM_BACKEND", "cuda")


def dense(t):
    """`t` itself when C-contiguous, else a contiguous copy (vLLM passes expanded block
    tables, row stride 0, for continuation chunks)."""
    return t if t.is_contiguous() else t.contiguous()


_workspaces = {}


def _current_stream(index):
    """The current stream of CUDA device `index` as an int (torch's raw handle: no
    Stream object made per call)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def workspace(device, nbytes):
    """Decode scratch for the current stream of `device`: one buffer per (device, stream),
    grown as needed, reused by the eager calls on that stream (two streams decoding at
    once, as vLLM's overlapped micro-batches do, each keep their own, and torch's
    allocator hands a dropped buffer only to work ordered after it on its stream);
    inside CUDA-graph capture a fresh one from torch's graph pool."""
    if torch.cuda.is_current_stream_capturing():
        return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
    key = (device.index, _current_stream(device.index))
    buf = _workspaces.get(key)
    if buf is None or buf.numel() < nbytes:
        buf = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
        _workspaces[key] = buf
    return buf


def sink_logits(sinks, num_q_heads, device):
    """vLLM's sinks ([Hq], any float dtype) as the library takes them: float32, contiguous,
    on the query's device; None stays None."""
    if sinks is None:
        return None
    if sinks.numel() != num_q_heads:
        raise ValueError(f"sinks: {sinks.numel()} values, expected one per query head (Hq = {num_q_heads})")
    if sinks.device != device:
        raise ValueError(f"sinks: on {sinks.device}, the query on {device}")
    return dense(sinks.reshape(num_q_heads).to(torch.float32))


def run_decode(query, kv_cache, block_table, seq_lens, lay, scale, num_splits, out, lse, rot, cb,
               query_start_loc=None, sinks=None):
    """turboquant.decode with vLLM's tensors: contiguous inputs, the first B rows of
    seq_lens / block_table (B: sequences, query_start_loc's B + 1 entries or one row
    each), a workspace on CUDA, and outputs that may be strided views of vLLM's buffers
    (written through a contiguous temporary then). `sinks`: float32 [Hq] (sink_logits)."""
    rows = query.shape[0]
    B = rows if query_start_loc is None else query_start_loc.shape[0] - 1
    q = dense(query)
    table = dense(first_rows(block_table, B))
    lens = dense(first_rows(seq_lens, B))
    qsl = None if query_start_loc is None else dense(query_start_loc)
    target_out = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    target_lse = lse if lse is None or lse.is_contiguous() else torch.empty(lse.shape, dtype=lse.dtype,
                                                                            device=lse.device)
    ws = None
    if q.is_cuda:
        ws = workspace(q.device, _tq.decode_workspace_bytes(rows, q.shape[1], num_splits, lay.head_dim))
    _tq.decode(q, kv_cache, table, lens, lay, scale, num_splits, target_out, target_lse,
               backend() if q.is_cuda else None, workspace=ws, centroids=cb, rotation=rot, query_start_loc=qsl,
               sinks=sinks)
    if target_out is not out:
        out.copy_(target_out)
    if target_lse is not lse:
        lse.copy_(target_lse)


def first_rows(t, rows):
    """t[:rows] (a view), or t itself when it has exactly `rows` rows: torch's indexing
    costs microseconds of host time per call, and vLLM's launchers run once per layer and
    step (docs/PERFORMANCE.md, Python run 7)."""
    return t if t.shape[0] == rows else t.narrow(0, 0, rows)


def reuse(buf, rows, shape, dtype, device, holder, attribute, require_dtype=None):
    """vLLM's buffer rule: buf[:rows, ...] when given with at least `rows` rows (and, if
    require_dtype, that dtype); else a new tensor, remembered on `holder` as vLLM does."""
    if buf is not None and buf.shape[0] >= rows and (require_dtype is None or buf.dtype == require_dtype):
        if buf.shape[1:] == shape[1:]:
            return first_rows(buf, rows)
        return buf[tuple(slice(0, n) for n in shape)]
    t = torch.empty(shape, dtype=dtype, device=device)
    if holder is not None:
        setattr(holder, attribute, t)
    return t
