"""Case directories (tests/data/*/README.md, docs/PYTHON.md): meta.json plus
.npy arrays describing one decode and the store before it, the format `tq`
reads. load_case checks a directory exactly as `tq` does (the C++ loader);
save_case writes one and reads it back through the same checks, so a batch
dumped from Python replays with `tq validate DIR`."""

from __future__ import annotations

import json
import os

import numpy as np

from . import _arrays
from . import _turboquant as _ext

# The arrays of a case directory, in the README's order, and the integer
# dtypes the library takes (floats keep their stored dtype).
_ARRAYS = ("query", "keys", "values", "slot_mapping", "kv_cache", "block_table", "seq_lens", "centroids",
           "expected_out", "expected_lse", "reference_out_f64", "query_start_loc", "sinks")
_INT_DTYPES = {"slot_mapping": np.int64, "block_table": np.int32, "seq_lens": np.int32, "query_start_loc": np.int32}


class Case:
    """One case directory. Attributes: ``layout`` (a turboquant.Layout), ``scale``,
    ``num_splits`` (meta.json num_kv_splits), ``num_q_heads``, ``meta`` (the parsed
    meta.json), ``path``, and the arrays, None where the file is absent: ``query``,
    ``kv_cache``, ``block_table``, ``seq_lens``, ``keys``, ``values``, ``slot_mapping``,
    ``centroids``, ``expected_out``, ``expected_lse``, ``reference_out_f64``, and for
    multi-token cases ``query_start_loc``, ``sinks``, ``sliding_window`` (0: none)."""

    def __init__(self, info: dict):
        self.path = info["path"]
        from . import Layout
        self.layout = Layout(info["preset"], info["head_dim"], info["block_size"], info["num_kv_heads"],
                                  info["layout"], info["fp8_format"])
        self.scale = float(info["scale"])
        self.num_splits = int(info["num_kv_splits"])
        self.num_q_heads = int(info["num_q_heads"])
        self.source = info["source"]
        self.sliding_window = int(info["sliding_window"])
        with open(os.path.join(self.path, "meta.json"), encoding="utf-8") as f:
            self.meta = json.load(f)
        files = info["files"]
        for name in _ARRAYS:
            array = None
            if name in files:
                array = np.load(files[name], allow_pickle=False)
                if name in _INT_DTYPES:
                    array = array.astype(_INT_DTYPES[name], copy=False)
            setattr(self, name, array)

    def decode_args(self):
        """(query, kv_cache, block_table, seq_lens, layout) for turboquant.decode."""
        return self.query, self.kv_cache, self.block_table, self.seq_lens, self.layout

    def decode(self, **kwargs):
        """turboquant.decode of the case (its scale and num_splits unless given)."""
        from . import decode
        kwargs.setdefault("scale", self.scale)
        kwargs.setdefault("num_splits", self.num_splits)
        kwargs.setdefault("query_start_loc", self.query_start_loc)
        kwargs.setdefault("sinks", self.sinks)
        kwargs.setdefault("sliding_window", self.sliding_window)
        return decode(*self.decode_args(), **kwargs)

    def validate_cache(self, kv_cache=None, **kwargs):
        """turboquant.validate_cache of ``kv_cache`` (default: the case's kv_cache.npy, what
        vLLM's store wrote) against the golden encode of the case's keys, values and
        slot_mapping: the numbers of ``tq validate DIR --cache FILE``."""
        from . import validate_cache
        if self.keys is None or self.values is None or self.slot_mapping is None:
            raise ValueError(f"validate_cache: the case {self.path!r} needs keys.npy, values.npy and slot_mapping.npy")
        if kv_cache is None:
            kv_cache = self.kv_cache
            kwargs.setdefault("cache_name", "kv_cache.npy")
        kwargs.setdefault("centroids", self.centroids if not self.layout.fp8_keys else None)
        return validate_cache(kv_cache, self.keys, self.values, self.slot_mapping, self.layout, **kwargs)

    def multi_token_or_sinks_or_window(self):
        """Whether the case has query_start_loc.npy, sinks.npy or a sliding window."""
        return self.query_start_loc is not None or self.sinks is not None or self.sliding_window != 0

    def validate(self, output=None, **kwargs):
        """turboquant.validate of ``output`` (default: the case's expected_out) with the
        case's scale, num_splits, stored K/V (for the format error) and reference_out_f64:
        the numbers and verdict of ``tq validate DIR``."""
        from . import validate
        if output is None:
            output = self.expected_out
            kwargs.setdefault("output_name", "expected_out.npy")
        if output is None:
            raise ValueError(f"output: the case {self.path!r} has no expected_out.npy: pass the output to check")
        kwargs.setdefault("scale", self.scale)
        kwargs.setdefault("num_splits", self.num_splits)
        if self.keys is not None and self.values is not None and self.slot_mapping is not None:
            kwargs.setdefault("keys", self.keys)
            kwargs.setdefault("values", self.values)
            kwargs.setdefault("slot_mapping", self.slot_mapping)
        if self.reference_out_f64 is not None:
            kwargs.setdefault("reference_out_f64", self.reference_out_f64)
        kwargs.setdefault("query_start_loc", self.query_start_loc)
        kwargs.setdefault("sinks", self.sinks)
        kwargs.setdefault("sliding_window", self.sliding_window)
        return validate(output, *self.decode_args(), **kwargs)

    def __repr__(self):
        present = [n for n in _ARRAYS if getattr(self, n) is not None]
        return f"turboquant.Case({self.path!r}, {self.layout!r}, arrays={present})"


def load_case(path) -> Case:
    """Reads a case directory; ValueError naming the file and value for anything `tq`
    would refuse (a missing meta.json key, an unknown one, an array whose dtype or shape
    disagrees with meta.json or the other arrays)."""
    return Case(_ext._load_case(os.fspath(path)))


def save_case(path, *, layout, query, kv_cache, block_table, seq_lens, scale=None, num_splits=32, keys=None,
              values=None, slot_mapping=None, expected_out=None, expected_lse=None, reference_out_f64=None,
              centroids=None, source="turboquant.save_case", overwrite=False) -> Case:
    """Writes a case directory (any array library; device arrays are copied to the host,
    bfloat16 stored as float32) and returns it as read back by load_case. ``path`` must not
    exist or be an empty directory unless overwrite=True. ``expected_out`` is the output to
    check (``tq validate DIR`` compares it with the golden model); keys, values and
    slot_mapping (the K/V that were stored) let validate measure the format's own error."""
    if not isinstance(layout, _ext._Layout):
        raise TypeError(f"layout: expected a turboquant.Layout, got {type(layout).__name__}")
    path = os.fspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ValueError(f"path: {path!r} exists and is not a directory")
        if os.listdir(path) and not overwrite:
            raise ValueError(f"path: {path!r} is not empty (pass overwrite=True to replace its files)")
    q = _arrays.to_numpy(query)
    if q.ndim != 3:
        raise ValueError(f"query: shape {list(q.shape)} has {q.ndim} dimensions, expected 3 [B, Hq, head_dim]")
    meta = {
        "preset": layout.preset,
        "head_dim": layout.head_dim,
        "block_size": layout.block_size,
        "num_kv_heads": layout.num_kv_heads,
        "num_q_heads": int(q.shape[1]),
        "scale": float(1.0 / np.sqrt(layout.head_dim) if scale is None else scale),
        "num_kv_splits": int(num_splits),
        "source": str(source),
        "layout": layout.layout,
    }
    if layout.fp8_keys:
        meta["fp8_format"] = layout.fp8_format
    arrays = {"query": q, "kv_cache": kv_cache, "block_table": block_table, "seq_lens": seq_lens, "keys": keys,
              "values": values, "slot_mapping": slot_mapping, "expected_out": expected_out,
              "expected_lse": expected_lse, "reference_out_f64": reference_out_f64, "centroids": centroids}
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    for name, x in arrays.items():
        target = os.path.join(path, name + ".npy")
        if x is None:
            if overwrite and os.path.exists(target):
                os.remove(target)
            continue
        np.save(target, _arrays.to_numpy(x))
    return load_case(path)
