"""Drop-in for vllm.v1.attention.ops.turboquant_soa.triton_turboquant_unified_attention
(vLLM 0.33.0): ``triton_turboquant_unified_attention``, the SoA attention over several
query tokens per sequence (query_start_loc, causal; speculative decoding's verification
and chunked-prefill continuations) with optional sinks, on the library's decode
(docs/ARITHMETIC.md §7: the same rows, positions and sink as vLLM's kernel)."""

from __future__ import annotations

import torch

from ... import _adapter

__all__ = ["triton_turboquant_unified_attention"]


def triton_turboquant_unified_attention(
    query: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    query_start_loc: torch.Tensor,
    Pi: torch.Tensor,
    centroids: torch.Tensor,
    scale: float,
    mse_bits: int,
    key_packed_size: int,
    value_quant_bits: int,
    value_packed_size: int,
    key_fp8: bool = False,
    norm_correction: bool = False,
    PiT: torch.Tensor | None = None,
    output: torch.Tensor | None = None,
    tile_size: int | None = None,
    max_query_len: int | None = None,
    max_seq_len: int | None = None,
    num_kv_splits: int | None = None,
    force_2d: bool = False,
    fuse_q_rot: bool = True,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """vLLM's unified launcher: query [N, Hq, D] (raw, not rotated), query_start_loc int32
    [B + 1] (sequence b's tokens are rows query_start_loc[b] .. query_start_loc[b + 1] - 1,
    the last q_len_b of its seq_lens[b] cached tokens, each attending causally), optional
    sinks [Hq]. Returns ``output`` (written in place when given, else a new tensor like
    ``query``), [N, Hq, D]. As in vLLM, value_packed_size is unused; tile_size,
    max_query_len, max_seq_len, force_2d and fuse_q_rot tune vLLM's Triton kernel and
    change nothing here; num_kv_splits (default 32) is the library's num_splits."""
    del value_packed_size, tile_size, max_query_len, max_seq_len, force_2d, fuse_q_rot
    if query.dim() != 3:
        raise ValueError(f"query: shape {list(query.shape)}, expected [num_tokens, Hq, D]")
    if query_start_loc.dim() != 1 or query_start_loc.shape[0] < 1:
        raise ValueError(f"query_start_loc: shape {list(query_start_loc.shape)}, expected [num_seqs + 1]")
    N, Hq, D = query.shape
    lay, cb, rot = _adapter.decode_setup(query, kv_cache, "soa", Pi, PiT, centroids, mse_bits, key_packed_size,
                                         value_quant_bits, key_fp8, norm_correction)
    if output is None:
        output = torch.empty_like(query)
    elif tuple(output.shape) != (N, Hq, D):
        raise ValueError(f"output: shape {list(output.shape)}, expected {[N, Hq, D]} (the query's)")
    splits = 32 if num_kv_splits is None else int(num_kv_splits)
    _adapter.run_decode(query, kv_cache, block_table, seq_lens, lay, scale, splits, output, None, rot, cb,
                        query_start_loc=query_start_loc, sinks=_adapter.sink_logits(sinks, Hq, query.device))
    return output
