"""The SoA decode launchers' shared body: vLLM's v1 and v2 take the same
arguments (v2 adds value_packed_size and max_seq_len) and return the same thing,
``output.to(query.dtype)``."""

from __future__ import annotations

import torch

from ... import _adapter


def soa_decode(query, kv_cache, block_table, seq_lens, Pi, centroids, scale, mse_bits, key_packed_size,
               value_quant_bits, key_fp8, norm_correction, PiT, output_buf, lse_buf, buf_holder, max_num_kv_splits,
               sinks=None):
    B, Hq, D = query.shape
    sink = _adapter.sink_logits(sinks, Hq, query.device)
    lay, cb, rot = _adapter.decode_setup(query, kv_cache, "soa", Pi, PiT, centroids, mse_bits, key_packed_size,
                                         value_quant_bits, key_fp8, norm_correction)
    # vLLM allocates fp32 and returns .to(query.dtype): writing the query's dtype
    # directly gives the same tensor (one rounding, to nearest even) without the cast.
    dtype = query.dtype if output_buf is None else output_buf.dtype
    out = _adapter.reuse(output_buf, B, (B, Hq, D), dtype, query.device, buf_holder, "_tq_output_buf")
    lse = _adapter.reuse(lse_buf, B, (B, Hq), torch.float32, query.device, buf_holder, "_tq_lse_buf")
    _adapter.run_decode(query, kv_cache, block_table, seq_lens, lay, scale, int(max_num_kv_splits), out, lse, rot, cb,
                        sinks=sink)
    if sink is not None:  # vLLM's LSE counts the sink (its split 0 starts at m = sink, l = 1); the library's does not
        lse.copy_(torch.logaddexp(lse, sink.to(lse.dtype)[None, :]))
    return out if out.dtype == query.dtype else out.to(query.dtype)  # what .to returns, without its dispatch
