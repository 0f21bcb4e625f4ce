"""torch ops: ``torch.ops.turboquant.encode`` (mutates the cache) and
``torch.ops.turboquant.decode`` (writes ``out`` and ``lse``), registered with
``torch.library.custom_op`` and fake (meta) implementations, so they work under
``torch.compile(fullgraph=True)`` and inside ``torch.cuda.graph`` capture: the
decode's CUDA workspace is allocated through torch (a graph-private pool while
capturing). ``encode`` / ``decode`` below are the convenience wrappers taking
a :class:`turboquant.Layout`.

Importing this module imports torch; ``import turboquant`` alone does not."""

from __future__ import annotations

import functools
import math
from typing import Optional

import torch

import turboquant as _tq
from . import _turboquant as _ext

__all__ = ["encode", "decode"]


@functools.lru_cache(maxsize=None)
def _layout(preset: str, head_dim: int, block_size: int, num_kv_heads: int, layout: str, fp8_format: str):
    return _tq.Layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format)


def _layout_fields(layout):
    """The op arguments describing `layout` (plain values torch.compile can trace)."""
    if not isinstance(layout, _tq.Layout):
        raise TypeError(f"layout: expected a turboquant.Layout, got {type(layout).__name__}")
    return layout._fields


@torch.library.custom_op("turboquant::encode", mutates_args=("kv_cache",))
def _encode_op(kv_cache: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, slot_mapping: torch.Tensor,
               preset: str, head_dim: int, block_size: int, num_kv_heads: int, layout: str, fp8_format: str,
               backend: str) -> None:
    _tq.encode(kv_cache, keys, values, slot_mapping, _layout(preset, head_dim, block_size, num_kv_heads, layout,
                                                             fp8_format), backend or None)


@_encode_op.register_fake
def _(kv_cache, keys, values, slot_mapping, preset, head_dim, block_size, num_kv_heads, layout, fp8_format,
      backend):
    return None


@torch.library.custom_op("turboquant::decode", mutates_args=("out", "lse"))
def _decode_op(query: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
               preset: str, head_dim: int, block_size: int, num_kv_heads: int, layout: str, fp8_format: str,
               scale: float, num_splits: int, out: torch.Tensor, lse: Optional[torch.Tensor], backend: str) -> None:
    workspace = None
    if query.is_cuda:
        nbytes = _ext.decode_workspace_bytes(query.shape[0], query.shape[1], num_splits, head_dim)
        workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=query.device)
    _tq.decode(query, kv_cache, block_table, seq_lens,
               _layout(preset, head_dim, block_size, num_kv_heads, layout, fp8_format), scale, num_splits, out, lse,
               backend or None, workspace=workspace)


@_decode_op.register_fake
def _(query, kv_cache, block_table, seq_lens, preset, head_dim, block_size, num_kv_heads, layout, fp8_format, scale,
      num_splits, out, lse, backend):
    return None


def encode(kv_cache: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, slot_mapping: torch.Tensor, layout,
           backend: Optional[str] = None) -> torch.Tensor:
    """torch.ops.turboquant.encode: turboquant.encode as a torch op; returns kv_cache."""
    if slot_mapping.dtype == torch.int32:
        slot_mapping = slot_mapping.long()
    torch.ops.turboquant.encode(kv_cache, keys, values, slot_mapping, *_layout_fields(layout), backend or "")
    return kv_cache


def decode(query: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor, layout,
           scale: Optional[float] = None, num_splits: int = 32, out: Optional[torch.Tensor] = None,
           lse: Optional[torch.Tensor] = None, backend: Optional[str] = None) -> torch.Tensor:
    """torch.ops.turboquant.decode: turboquant.decode as a torch op; returns out (float32
    [B, Hq, D] when not given)."""
    fields = _layout_fields(layout)
    if scale is None:
        scale = 1.0 / math.sqrt(fields[1])
    if out is None:
        out = torch.empty(query.shape, dtype=torch.float32, device=query.device)
    torch.ops.turboquant.decode(query, kv_cache, block_table, seq_lens, *fields, float(scale), int(num_splits), out,
                                lse, backend or "")
    return out
