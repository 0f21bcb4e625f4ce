"""Drop-in for the seed's vllm.v1.attention.ops.turboquant_soa.triton_turboquant_decode_v2
(../shared/seed/; gone from vLLM 0.33.0, where the SoA decode is the unified kernel):
``triton_turboquant_decode_attention_v2`` on the library's fast (tensor-core) kernels."""

from __future__ import annotations

from typing import Any

import torch

from ._decode_common import soa_decode

__all__ = ["triton_turboquant_decode_attention_v2"]


def triton_turboquant_decode_attention_v2(
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
    value_packed_size: int,
    max_seq_len: int = 0,
    key_fp8: bool = False,
    norm_correction: bool = False,
    PiT: torch.Tensor | None = None,
    mid_o_buf: torch.Tensor | None = None,
    output_buf: torch.Tensor | None = None,
    lse_buf: torch.Tensor | None = None,
    buf_holder: Any = None,
    max_num_kv_splits: int = 32,
) -> torch.Tensor:
    """The seed's v2 launcher: same arguments, same return (``output.to(query.dtype)``,
    output = ``output_buf[:B]`` or new). value_packed_size is checked against the
    preset; max_seq_len is unused (as in vLLM)."""
    del max_seq_len, mid_o_buf
    expected = (int(query.shape[-1]) * int(value_quant_bits) + 7) // 8 + 4
    if int(value_packed_size) != expected:
        raise ValueError(f"value_packed_size = {value_packed_size} is not {expected} (ceil(D * {value_quant_bits} / 8) "
                         "+ 4)")
    return soa_decode(query, kv_cache, block_table, seq_lens, Pi, centroids, scale, mse_bits, key_packed_size,
                      value_quant_bits, key_fp8, norm_correction, PiT, output_buf, lse_buf, buf_holder,
                      max_num_kv_splits)
