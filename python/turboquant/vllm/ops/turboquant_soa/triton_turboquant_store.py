"""Drop-in for vllm.v1.attention.ops.turboquant_soa.triton_turboquant_store
(vLLM 0.33.0): the SoA store (what vLLM writes on AMD MI355X)."""

from __future__ import annotations

import torch

import turboquant as _tq
from ... import _adapter

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
    centroids: torch.Tensor | None = None,
    norm_correction: bool = False,
):
    """Quantizes key/value [N, Hk, D] into the SoA cache at slot_mapping [N]
    (negative slots skipped); returns None. With norm_correction the stored key norm
    is ||k|| / ||c|| (folded at store, as vLLM's SoA store does); vLLM asserts that
    centroids are given then, and so does this."""
    preset = _adapter.preset_name(mse_bits, value_quant_bits, key_fp8, norm_correction or key_fp8)
    head_dim = int(key.shape[-1])
    lay = _adapter.layout_for(kv_cache, head_dim, preset, "soa", key_packed_size)
    cb = rot = None
    if not key_fp8:
        if centroids is None:
            raise ValueError("centroids: None with norm_correction=True (vLLM's SoA store asserts it too: the "
                             "folded norm needs the centroids)")
        cb = _adapter.check_midpoints(midpoints, centroids, lay.key_bits, head_dim)
        rot = _adapter.rotation(None, PiT, head_dim)
    _tq.encode(kv_cache, _adapter.dense(key), _adapter.dense(value), slot_mapping, lay, centroids=cb, rotation=rot)
