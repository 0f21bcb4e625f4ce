"""Drop-in for vllm.v1.attention.ops.turboquant_soa.triton_turboquant_decode
(vLLM 0.33.0): the SoA decode "v1"."""

from __future__ import annotations

from typing import Any

import torch

from ..._adapter import _use_fp8_e4b15
from ._decode_common import soa_decode

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
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode attention over the SoA cache; returns ``output.to(query.dtype)`` where
    output is ``output_buf[:B]`` (at least B rows, any dtype) or a new tensor. The LSE
    goes to ``lse_buf[:B]``. ``mid_o_buf`` is not used (the library's own workspace
    holds the partials). ``sinks`` ([Hq], the scaled scores' units) add exp(sink) to each
    head's softmax denominator; the LSE then counts them, as vLLM's does."""
    return soa_decode(query, kv_cache, block_table, seq_lens, Pi, centroids, scale, mse_bits, key_packed_size,
                      value_quant_bits, key_fp8, norm_correction, PiT, output_buf, lse_buf, buf_holder,
                      max_num_kv_splits, sinks)
