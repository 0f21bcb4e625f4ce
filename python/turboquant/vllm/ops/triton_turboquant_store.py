"""Drop-in for vllm.v1.attention.ops.triton_turboquant_store (vLLM 0.33.0): the
AoS store vLLM runs on every NVIDIA GPU."""

from __future__ import annotations

import torch

import turboquant as _tq
from .. import _adapter

__all__ = ["triton_turboquant_store"]


def triton_turboquant_store(
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    PiT: torch.Tensor,
    midpoints: torch.Tensor,
    mse_bits: int,
    key_packed_size: int,
    value_quant_bits: int,
    key_fp8: bool = False,
):
    """Quantizes key/value [N, Hk, D] (fp16/bf16/fp32) into the AoS cache
    [num_blocks, block_size, Hk, slot] uint8 at slot_mapping [N] (negative slots
    skipped); returns None, like vLLM's. The stored norm is the raw ||k|| (AoS);
    FP8 keys use e4b15 below sm_89, as vLLM does."""
    preset = _adapter.preset_name(mse_bits, value_quant_bits, key_fp8)
    head_dim = int(key.shape[-1])
    lay = _adapter.layout_for(kv_cache, head_dim, preset, "aos", key_packed_size)
    cb = rot = None
    if not key_fp8:
        cb = _adapter.check_midpoints(midpoints, None, lay.key_bits, head_dim)
        rot = _adapter.rotation(None, PiT, head_dim)
    _tq.encode(kv_cache, _adapter.dense(key), _adapter.dense(value), slot_mapping, lay, centroids=cb, rotation=rot)
