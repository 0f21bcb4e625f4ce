"""turboquant: attention over a TurboQuant-compressed, paged KV cache (vLLM's
``--kv-cache-dtype turboquant_*``), on numpy, torch, CuPy or JAX arrays.

The functions mirror the C++ API (docs/PYTHON.md):

* :class:`Layout` describes a cache (preset, head_dim, block_size, num_kv_heads,
  'soa' or 'aos', the FP8 flavour); :func:`codebook`, :func:`backends`.
* :func:`encode` (vLLM's store), :func:`decode`, :func:`dequantize`.
* :func:`validate` checks any decode output against the golden model, as
  ``tq validate`` does; :func:`load_case` / :func:`save_case` read and write
  case directories.

The backend follows the arrays: CPU arrays run on ``cpu`` (SIMD + threads,
bit-exact with the golden model), CUDA arrays on ``cuda`` (tensor cores) on the
arrays' device and the current stream, unless ``backend=`` names one of
``cpu-ref``, ``cpu`` (or ``cpu:scalar`` / ``cpu:avx2`` / ``cpu:avx512``),
``cuda`` or ``cuda-strict``. Bad arguments raise ValueError or TypeError naming
the argument and its value; nothing is written then. The GIL is released while
the library computes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import _arrays
from . import _turboquant as _ext



class Layout(_ext._Layout):
    """A TurboQuant cache's format and block layout: the preset ('turboquant_4bit_nc' or
    '4bit_nc', ...), head_dim, block_size, num_kv_heads, the byte layout ('soa', or
    'aos': what vLLM writes on NVIDIA GPUs) and, for k8v4, the FP8 flavour ('e4m3', or
    'e4b15': vLLM below sm_89). Its numbers are those `tq info` prints; ``cache_shape(n)``
    is vLLM's kv_cache shape. ValueError names a bad value."""

    def __init__(self, preset, head_dim, block_size, num_kv_heads, layout="soa", fp8_format="e4m3"):
        super().__init__(preset, head_dim, block_size, num_kv_heads, layout, fp8_format)
        # Plain Python values, for code that torch.compile traces (turboquant.torch).
        self._fields = (self.preset, self.head_dim, self.block_size, self.num_kv_heads, self.layout, self.fp8_format)

    def __reduce__(self):
        return (Layout, self._fields)

isas = _ext.isas
cuda_built = _ext.cuda_built
decode_workspace_bytes = _ext.decode_workspace_bytes

from ._case import Case, load_case, save_case  # noqa: E402 (they use Layout)
from ._validate import CacheValidation, Validation, validate, validate_cache  # noqa: E402

__all__ = [
    "Layout", "Codebook", "codebook", "Backend", "backends", "isas", "cuda_built",
    "encode", "decode", "dequantize", "dequantize_sequences", "decode_workspace_bytes",
    "validate", "Validation", "validate_cache", "CacheValidation", "load_case", "save_case", "Case",
]


class Codebook(NamedTuple):
    """vLLM's fp32 Lloyd-Max codebook for (bits, head_dim)."""
    bits: int
    head_dim: int
    centroids: np.ndarray  # float32 [2^bits], sorted
    midpoints: np.ndarray  # float32 [2^bits - 1], (c[i] + c[i+1]) / 2 in fp32


def codebook(bits: int, head_dim: int) -> Codebook:
    """vLLM's codebook for N(0, 1/head_dim) keys: bit-identical to vLLM's table."""
    centroids, midpoints = _ext._codebook(int(bits), int(head_dim))
    return Codebook(int(bits), int(head_dim), np.array(centroids, dtype=np.float32),
                    np.array(midpoints, dtype=np.float32))


class Backend(NamedTuple):
    """One entry of the library's backend registry."""
    name: str           # 'cpu-ref', 'cpu:avx2', 'cuda:fast', ...
    description: str
    available: bool
    exact_decode: bool  # decode reproduces the golden model's bits
    reason: str         # why it is unavailable ('' when available)


def backends() -> list[Backend]:
    """Every backend of this build (unavailable ones too, with the reason)."""
    return [Backend(*b) for b in _ext._backends()]


def _check_layout(layout):
    if not isinstance(layout, Layout):
        raise TypeError(f"layout: expected a turboquant.Layout, got {type(layout).__name__}")


def _host_centroids(centroids):
    return None if centroids is None else _arrays.to_numpy(centroids, np.float32)


def encode(kv_cache, keys, values, slot_mapping, layout, backend=None, *, stream=None, centroids=None,
           rotation=None, threads=0, check_finite=True):
    """Quantizes K/V into the cache in place (vLLM's store).

    kv_cache: uint8 ``layout.cache_shape(num_blocks)``; keys, values: [N, Hk, D] float32,
    float16 or bfloat16 (one dtype); slot_mapping: int64 (or int32) [N], slot =
    block * block_size + offset, negative slots skipped. Writes exactly the slots' bytes,
    byte-identical with the golden model on every backend. centroids (float32
    [2^key_bits]) replaces vLLM's codebook; rotation (float32 [D, D], PiT) replaces the
    Hadamard rotation. threads: CPU worker threads (0: all)."""
    # As in decode: exact type tests first (vLLM's store calls this once per layer and
    # step); the named checks run when the extension refuses an argument.
    if type(layout) is not Layout:
        _check_layout(layout)
    if type(kv_cache) is np.ndarray:
        _arrays.require_writable("kv_cache", kv_cache)
    slot_mapping = _as_int64(slot_mapping)
    if type(threads) is not int or not -2**31 <= threads < 2**31:
        threads = _arrays.require_int32("threads", threads)
    try:
        _ext._encode(layout, kv_cache, keys, values, slot_mapping, backend or "",
                     _arrays.stream_handle(stream, kv_cache),
                     None if centroids is None else _host_centroids(centroids), rotation, threads,
                     bool(check_finite))
    except TypeError:
        _arrays.name_the_array((("kv_cache", kv_cache), ("keys", keys), ("values", values),
                                ("slot_mapping", slot_mapping), ("rotation", rotation)))
        raise
    return kv_cache


def decode(query, kv_cache, block_table, seq_lens, layout, scale=None, num_splits=32, out=None, lse=None,
           backend=None, stream=None, workspace=None, *, query_start_loc=None, sinks=None, sliding_window=0,
           centroids=None, rotation=None, threads=0, check_finite=True):
    """Decode attention, one query token per sequence; returns ``out``.

    Multi-token rows (speculative decoding, chunked prefill): with ``query_start_loc``
    (int32 [B+1], vLLM's), query / out / lse hold T = query_start_loc[B] rows; row i of
    sequence b sits at position seq_lens[b] - q_len_b + i and attends causally. ``sinks``
    (float32 [Hq]) add exp(sink) to each head's softmax denominator; ``sliding_window`` W
    limits a row at position p to positions p - W + 1 .. p. The CPU backends and cuda-strict
    give the golden model's bits for them; cuda (fast) is within its 1e-3 bound.

    query: [B, Hq, D] float32/float16/bfloat16, unrotated; kv_cache: uint8
    ``layout.cache_shape(num_blocks)``; block_table: int32 [B, max_blocks]; seq_lens: int32
    [B]. scale defaults to 1/sqrt(D); num_splits is vLLM's NUM_KV_SPLITS (the golden
    model's split plan: results of exact backends depend on it). out: [B, Hq, D]
    float32/float16/bfloat16 (allocated as float32 when None); lse: optional float32
    [B, Hq], natural log. CUDA: runs on ``stream`` (default: the array library's current
    stream), never synchronizes the host, and allocates nothing when ``workspace`` (uint8,
    at least ``decode_workspace_bytes(B, Hq, num_splits, D)`` bytes) is given, which is
    required while a CUDA graph is being captured."""
    # The hot path of an eager CUDA call (docs/PERFORMANCE.md: per-call overhead): exact
    # type tests first; the full checks with named messages run when something is off.
    if type(layout) is not Layout:
        _check_layout(layout)
    if scale is None:
        scale = 1.0 / math.sqrt(layout._fields[1])
    if out is None:
        _arrays.require_array("query", query)
        shape = tuple(query.shape)
        if len(shape) != 3:
            raise ValueError(f"query: shape {list(shape)} has {len(shape)} dimensions, expected 3 [B, Hq, head_dim]")
        out = _arrays.empty(query, shape, "float32")
    elif type(out) is np.ndarray:
        _arrays.require_writable("out", out)
    if type(lse) is np.ndarray:
        _arrays.require_writable("lse", lse)
    if type(num_splits) is not int or not -2**31 <= num_splits < 2**31:
        num_splits = _arrays.require_int32("num_splits", num_splits)
    if type(threads) is not int or not -2**31 <= threads < 2**31:
        threads = _arrays.require_int32("threads", threads)
    if type(sliding_window) is not int or not -2**31 <= sliding_window < 2**31:
        sliding_window = _arrays.require_int32("sliding_window", sliding_window)
    if workspace is None and backend in (None, "cuda", "cuda-strict", "cuda:fast", "cuda:strict"):
        workspace = _torch_workspace(query, num_splits, layout._fields[1])
    try:
        _ext._decode(layout, query, kv_cache, block_table, seq_lens, float(scale), num_splits, out, lse,
                     backend or "", _arrays.stream_handle(stream, query), workspace,
                     None if centroids is None else _host_centroids(centroids), rotation, threads,
                     bool(check_finite), query_start_loc, sinks, sliding_window)
    except TypeError:
        # nanobind's "incompatible function arguments": say which argument instead.
        _arrays.name_the_array((("query", query), ("kv_cache", kv_cache), ("block_table", block_table),
                                ("seq_lens", seq_lens), ("out", out), ("lse", lse), ("workspace", workspace),
                                ("rotation", rotation), ("query_start_loc", query_start_loc), ("sinks", sinks)))
        raise
    return out


def _torch_workspace(query, num_splits, head_dim):
    """For torch CUDA tensors: the decode workspace from torch's caching allocator (the
    extension would otherwise take it from CUDA's stream-ordered pool, which returns its
    memory at every synchronization). None while a graph is being captured: the
    extension then refuses the call, naming workspace=."""
    torch = _arrays.torch_module(query)
    if torch is None or not query.is_cuda or torch.cuda.is_current_stream_capturing():
        return None
    shape = query.shape
    if len(shape) != 3:
        return None  # the extension names the problem
    nbytes = _ext.decode_workspace_bytes(int(shape[0]), int(shape[1]), num_splits, head_dim)
    return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=query.device) if nbytes > 0 else None


def dequantize(kv_cache, slots, layout, basis="original", *, dtype="float32", backend=None, stream=None,
               centroids=None, rotation=None, threads=0):
    """The cache's K and V at ``slots`` (int64 [N]) as [N, Hk, D] arrays of ``dtype``
    ('float32': the golden model's bits; 'float16' / 'bfloat16': those rounded to nearest
    even; the name, or a numpy or torch dtype: np.float16, torch.bfloat16), keys in the
    'original' basis (rotated back) or the 'rotated' one (as stored); returns (keys, values).
    CPU arrays run the golden model, CUDA arrays the CUDA kernel (the same bytes) on the
    current stream."""
    _check_layout(layout)
    _arrays.require_array("kv_cache", kv_cache)
    _arrays.require_array("slots", slots)
    slots = _as_int64(slots)
    if len(slots.shape) != 1:
        raise ValueError(f"slots: shape {list(slots.shape)} has {len(slots.shape)} dimensions, expected 1 [num_slots]")
    shape = (int(slots.shape[0]), layout.num_kv_heads, layout.head_dim)
    dtype = _arrays.output_dtype(dtype)
    keys = _arrays.empty(kv_cache, shape, dtype)
    values = _arrays.empty(kv_cache, shape, dtype)
    try:
        _ext._dequantize(layout, kv_cache, slots, keys, values, str(basis), backend or "",
                         _arrays.stream_handle(stream, kv_cache), _host_centroids(centroids), rotation,
                         _arrays.require_int32("threads", threads))
    except TypeError:
        _arrays.name_the_array((("kv_cache", kv_cache), ("slots", slots), ("rotation", rotation)))
        raise
    return keys, values


def dequantize_sequences(kv_cache, block_table, seq_lens, layout, max_seq=None, basis="original", *,
                         dtype="float32", backend=None, stream=None, centroids=None, rotation=None):
    """Whole sequences through a block table, in the [B, Hk, max_seq, D] layout of vLLM's
    continuation prefill (what it feeds to FlashAttention): position j < seq_lens[b] of
    sequence b at [b, :, j]; rows past seq_lens[b] are zero. max_seq defaults to block_table.shape[1] * block_size (no device-to-host read
    of seq_lens). Returns (keys, values) of ``dtype``; basis as in dequantize."""
    _check_layout(layout)
    for name, x in (("kv_cache", kv_cache), ("block_table", block_table), ("seq_lens", seq_lens)):
        _arrays.require_array(name, x)
    if len(block_table.shape) != 2:
        raise ValueError(f"block_table: shape {list(block_table.shape)} has {len(block_table.shape)} dimensions, "
                         "expected 2 [B, max_blocks_per_seq]")
    if max_seq is None:
        max_seq = int(block_table.shape[1]) * layout.block_size
    max_seq = _arrays.require_int32("max_seq", max_seq)
    if max_seq < 0:
        raise ValueError(f"max_seq = {max_seq} must be >= 0")
    shape = (int(block_table.shape[0]), layout.num_kv_heads, max_seq, layout.head_dim)
    dtype = _arrays.output_dtype(dtype)
    keys = _arrays.zeros(kv_cache, shape, dtype)
    values = _arrays.zeros(kv_cache, shape, dtype)
    try:
        _ext._dequantize_sequences(layout, kv_cache, block_table, seq_lens, keys, values, str(basis),
                                   backend or "", _arrays.stream_handle(stream, kv_cache),
                                   _host_centroids(centroids), rotation)
    except TypeError:
        _arrays.name_the_array((("kv_cache", kv_cache), ("block_table", block_table), ("seq_lens", seq_lens),
                                ("rotation", rotation)))
        raise
    return keys, values


def _as_int64(x):
    """int32 slot arrays (what some callers hold) widened to the library's int64."""
    if type(x) is np.ndarray:
        return x.astype(np.int64) if x.dtype == np.int32 else x
    torch = _arrays.torch_module(x)
    if torch is not None:
        return x.long() if x.dtype == torch.int32 else x
    if isinstance(x, np.ndarray) and x.dtype == np.int32:
        return x.astype(np.int64)
    return x
