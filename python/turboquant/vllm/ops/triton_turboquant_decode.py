"""Drop-in for vllm.v1.attention.ops.triton_turboquant_decode (vLLM 0.33.0): the
AoS decode ("v1") vLLM runs on every NVIDIA GPU."""

from __future__ import annotations

from typing import Any

import torch

from .. import _adapter
from .._adapter import _use_fp8_e4b15

__all__ = ["triton_turboquant_decode_attention", "_use_fp8_e4b15"]


def triton_turboquant_decode_attention(
    query: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    Pi: torch.Tensor,
    centroids: torch.Tensor,
    scale: float,
    mse_bits: int,
    key_packed_size: int,
    value_quant_bits: int,
    key_fp8: bool = False,
    norm_correction: bool = False,
    PiT: torch.Tensor | None = None,
    mid_o_buf: torch.Tensor | None = None,
    output_buf: torch.Tensor | None = None,
    lse_buf: torch.Tensor | None = None,
    buf_holder: Any = None,
    max_num_kv_splits: int = 32,
) -> torch.Tensor:
    """Decode attention over the AoS cache, one query token per sequence; returns
    [B, Hq, D] in the query's dtype: ``output_buf[:B]`` when it has at least B rows
    and the query's dtype, else a new tensor (set as ``buf_holder._tq_output_buf``).
    The LSE goes to ``lse_buf[:B]`` (or a scratch tensor), as in vLLM. ``mid_o_buf`` is
    not needed (the library keeps its partials in its own workspace) and is left
    untouched. ``max_num_kv_splits`` is the split count (the fast kernel picks its own
    split plan; cuda-strict follows it exactly)."""
    B, Hq, D = query.shape
    lay, cb, rot = _adapter.decode_setup(query, kv_cache, "aos", Pi, PiT, centroids, mse_bits, key_packed_size,
                                         value_quant_bits, key_fp8, norm_correction)
    out = _adapter.reuse(output_buf, B, (B, Hq, D), query.dtype, query.device, buf_holder, "_tq_output_buf",
                         require_dtype=query.dtype)
    lse = _adapter.reuse(lse_buf, B, (B, Hq), torch.float32, query.device, buf_holder, "_tq_lse_buf")
    _adapter.run_decode(query, kv_cache, block_table, seq_lens, lay, scale, int(max_num_kv_splits), out, lse, rot, cb)
    return out
