"""turboquant.validate: is a decode output what the TurboQuant format says it
should be? The same computation, numbers and verdict as ``tq validate``
(turboquant::checks::validate_output): the output against the golden model
(the verdict: relative L2 <= rtol), against float64 attention over the
dequantized cache, and, given the original K/V, the format's own error."""

from __future__ import annotations

import math

import numpy as np

from . import _arrays
from . import _turboquant as _ext


class Comparison:
    """How far one output [B, Hq, D] is from another (float64): ``rel_l2``, ``max_abs``
    and where (``max_at`` = (sequence, head, dim)), ``cosine``, the worst (sequence, head)
    (``worst_seq``, ``worst_head``, ``worst_rel_l2``), ``non_finite`` values."""

    def __init__(self, d):
        self.name, self.key, self.note = d["name"], d["key"], d["note"]
        for k in ("rel_l2", "max_abs", "max_at", "got_at_max", "want_at_max", "cosine", "worst_seq", "worst_head",
                  "worst_rel_l2", "non_finite"):
            setattr(self, k, d[k])

    def __repr__(self):
        return (f"Comparison({self.name!r}: rel_l2={self.rel_l2:.3e}, max_abs={self.max_abs:.3e}, "
                f"cosine={self.cosine:.8f}, worst seq {self.worst_seq} head {self.worst_head})")


class Validation:
    """The result of turboquant.validate. ``ok``: rel L2 vs golden <= rtol. ``vs_golden``
    (the kernel error), ``vs_f64_dequant``, ``golden_vs_f64_dequant``, ``format_error``
    (None unless keys/values/slot_mapping were given), ``rows`` (all comparisons, as
    ``tq validate`` prints them); ``repr`` is tq validate's table and verdict."""

    def __init__(self, d, header):
        self.ok = bool(d["ok"])
        self.rtol = d["rtol"]
        self.output_name = d["output_name"]
        self.rows = [Comparison(r) for r in d["rows"]]
        self.oracle_non_finite = d["oracle_non_finite"]
        self.format_error_note = d["original_note"]
        self._text = header + d["text"]
        by_key = {r.key: r for r in self.rows}
        self.vs_golden = by_key["vs_golden"]
        self.vs_f64_dequant = by_key.get("vs_f64_dequant")
        self.golden_vs_f64_dequant = by_key.get("golden_vs_f64_dequant")
        self.format_error = by_key.get("f64_dequant_vs_f64_original")
        self.vs_f64_original = by_key.get("vs_f64_original")

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return self._text

    __str__ = __repr__


def validate(output, query, kv_cache, block_table, seq_lens, layout, rtol=1e-3, *, scale=None, num_splits=32,
             keys=None, values=None, slot_mapping=None, reference_out_f64=None, centroids=None,
             output_name="output", threads=0, query_start_loc=None, sinks=None, sliding_window=0) -> Validation:
    """Checks ``output`` ([B, Hq, D], any float dtype, any device) of a decode of ``query``
    over ``kv_cache`` against the golden model (decoded with ``num_splits``, vLLM's
    NUM_KV_SPLITS) and float64 oracles: ``assert turboquant.validate(...).ok``. Device arrays
    are copied to the host. keys, values (float [N, Hk, D]) and slot_mapping ([N]): the K/V
    that were stored, for the format error. Raises ValueError / TypeError for bad inputs
    (shapes, block ids, seq_lens), as decode does. query_start_loc, sinks and
    sliding_window as in turboquant.decode (output then has T rows)."""
    if not isinstance(layout, _ext._Layout):
        raise TypeError(f"layout: expected a turboquant.Layout, got {type(layout).__name__}")
    for name, x in (("output", output), ("query", query), ("kv_cache", kv_cache), ("block_table", block_table),
                    ("seq_lens", seq_lens)):
        _arrays.require_array(name, x)
    if scale is None:
        scale = 1.0 / math.sqrt(layout.head_dim)
    if not (isinstance(rtol, (int, float)) and math.isfinite(rtol) and rtol >= 0):
        raise ValueError(f"rtol = {rtol!r} must be a finite number >= 0")
    f32 = lambda x: _arrays.to_numpy(x, np.float32)  # noqa: E731
    q, out = f32(query), f32(output)
    cache = _arrays.to_numpy(kv_cache)
    table = _arrays.to_numpy(block_table, np.int32)
    lens = _arrays.to_numpy(seq_lens, np.int32)
    d = _ext._validate(layout, out, q, cache, table, lens, float(scale), int(num_splits), f32(keys), f32(values),
                       _arrays.to_numpy(slot_mapping, np.int64), _arrays.to_numpy(reference_out_f64, np.float64),
                       f32(centroids), float(rtol), str(output_name), int(threads),
                       _arrays.to_numpy(query_start_loc, np.int32), f32(sinks),
                       _arrays.require_int32("sliding_window", sliding_window))
    return Validation(d, d["header"] + "\n")  # tq validate's text without its case and output lines


class CacheValidation:
    """The result of turboquant.validate_cache: ``ok`` (nothing wrong), ``wrong`` (how many
    elements are wrong), ``counts`` (per field: identical, boundary_flip, one_ulp, wrong,
    worst_flip_ulps), ``wrong_items`` (the first ones: block, position, head, field, dim,
    byte_offset, golden, got, text); ``repr`` is ``tq validate --cache``'s report."""

    def __init__(self, d):
        self.ok = bool(d["ok"])
        self.wrong = int(d["wrong"])
        self.tokens = int(d["tokens"])
        self.written_slots = int(d["written_slots"])
        self.boundary_ulps = float(d["boundary_ulps"])
        self.counts = d["counts"]
        self.wrong_items = d["wrong_items"]
        self._text = d["text"]

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return self._text

    __str__ = __repr__


def validate_cache(kv_cache, keys, values, slot_mapping, layout, *, centroids=None, rotation=None, boundary_ulps=4.0,
                   max_report=20, cache_name="kv_cache") -> CacheValidation:
    """Checks a cache that a store kernel wrote (``kv_cache``, any device) from ``keys`` /
    ``values`` ([N, Hk, D], any float dtype) at ``slot_mapping`` ([N], negative skipped):
    re-encodes them with the golden model and classifies every slot as identical, a
    one-step code flip at a decision boundary (the exact quotient within ``boundary_ulps``
    fp32 ulps of it: approximate division, as vLLM's Triton store does), fp16 metadata one
    ulp apart, or wrong (named by block, position, head, field and dim). Bytes outside the
    written slots must be unchanged from a zero-filled cache. ``assert validate_cache(...).ok``."""
    if not isinstance(layout, _ext._Layout):
        raise TypeError(f"layout: expected a turboquant.Layout, got {type(layout).__name__}")
    for name, x in (("kv_cache", kv_cache), ("keys", keys), ("values", values), ("slot_mapping", slot_mapping)):
        _arrays.require_array(name, x)
    f32 = lambda x: _arrays.to_numpy(x, np.float32)  # noqa: E731
    d = _ext._validate_cache(layout, _arrays.to_numpy(kv_cache), f32(keys), f32(values),
                             _arrays.to_numpy(slot_mapping, np.int64), f32(centroids), f32(rotation),
                             float(boundary_ulps), _arrays.require_int32("max_report", max_report), str(cache_name))
    return CacheValidation(d)
