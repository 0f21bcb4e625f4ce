"""Shared fixtures of the turboquant package's CPU tests (numpy only).

TQ_TEST_DATA: the test data directory (default <repo>/tests/data).
TQ_BIN: the `tq` tool for comparisons (default: the newest build*/tools/tq/tq under
the repository); tests that need it skip when it is absent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import turboquant as tq

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("TQ_TEST_DATA", REPO / "tests" / "data"))
CPU_BACKEND_NAMES = ("cpu-ref", "cpu", "cpu:scalar", "cpu:avx2", "cpu:avx512")


def case_dirs(kind=None):
    """Every case directory under DATA/vllm-soa and DATA/vllm-aos (or one of them)."""
    kinds = [kind] if kind else ["vllm-soa", "vllm-aos"]
    found = []
    for k in kinds:
        root = DATA / k
        if root.is_dir():
            found += sorted(p for p in root.iterdir() if (p / "meta.json").is_file())
    return found


def case_params(kind=None):
    dirs = case_dirs(kind)
    if not dirs:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no case directories under {DATA}"))]
    return [pytest.param(d, id=d.name) for d in dirs]


def find_tq():
    env = os.environ.get("TQ_BIN")
    if env:
        return Path(env) if Path(env).is_file() else None
    candidates = [p for p in REPO.glob("build*/tools/tq/tq") if p.is_file() and os.access(p, os.X_OK)]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None


def available_cpu_backends():
    available = {b.name for b in tq.backends() if b.available}
    return [n for n in CPU_BACKEND_NAMES if n == "cpu" or n in available]


@pytest.fixture(scope="session")
def data_dir():
    if not DATA.is_dir():
        pytest.skip(f"test data directory {DATA} is absent (set TQ_TEST_DATA)")
    return DATA


@pytest.fixture(scope="session")
def tq_bin():
    path = find_tq()
    if path is None:
        pytest.skip("no tq binary (set TQ_BIN or build tools/tq)")
    return path


@pytest.fixture(scope="session")
def run_tq(tq_bin):
    """run_tq(*args) -> CompletedProcess (text); never raises on a non-zero exit."""
    def run(*args):
        return subprocess.run([str(tq_bin), *map(str, args)], capture_output=True, text=True, timeout=120)
    return run


@pytest.fixture(scope="session")
def tq_json(run_tq):
    """tq_json(*args, ok_codes=(0,)) -> the parsed --json output of a tq command."""
    def run(*args, ok_codes=(0,)):
        r = run_tq(*args, "--json")
        assert r.returncode in ok_codes, f"tq {' '.join(map(str, args))}: rc {r.returncode}\n{r.stderr}"
        return json.loads(r.stdout)
    return run


_CASES = {}


def load(path):
    """turboquant.load_case, cached per session (tests must not modify the arrays)."""
    key = str(path)
    if key not in _CASES:
        c = tq.load_case(path)
        for name in ("query", "kv_cache", "block_table", "seq_lens", "keys", "values", "slot_mapping",
                     "expected_out", "expected_lse", "reference_out_f64", "centroids"):
            a = getattr(c, name)
            if a is not None:
                a.setflags(write=False)
        _CASES[key] = c
    return _CASES[key]


@pytest.fixture(scope="session")
def small_case(data_dir):
    """A small case (D=64, MHA, SoA) for argument checks."""
    dirs = [d for d in case_dirs("vllm-soa") if d.name.startswith("s03")] or case_dirs()
    if not dirs:
        pytest.skip("no case directories")
    return load(dirs[0])


def bits(a):
    """The bit pattern of a float array, for bitwise comparisons."""
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def slot_byte_mask(layout, num_blocks, slots):
    """Which bytes of a cache the given slots own, from docs/FORMAT.md §3 (an
    independent restatement of the layout, so a store that writes outside its slots
    is caught)."""
    bs, hk, sba = layout.block_size, layout.num_kv_heads, layout.slot_bytes_aligned
    mask = np.zeros(num_blocks * layout.block_bytes, dtype=bool)
    db = layout.key_data_bytes + layout.value_data_bytes
    nf = layout.meta_fields
    for slot in np.asarray(slots, np.int64):
        if slot < 0:
            continue
        block, t = divmod(int(slot), bs)
        base = block * layout.block_bytes
        for h in range(hk):
            if layout.layout == "aos":
                start = base + (t * hk + h) * sba
                mask[start:start + layout.slot_bytes] = True
            else:
                start = base + (t * hk + h) * db
                mask[start:start + db] = True
                meta = base + bs * hk * db
                for f in range(nf):
                    at = meta + 2 * ((h * nf + f) * bs + t)
                    mask[at:at + 2] = True
    return mask.reshape(layout.cache_shape(num_blocks))


def reference_attention(query, keys_by_seq, values_by_seq, scale):
    """float64 dense attention, one query token per sequence: lists of [T, Hk, D]
    K/V per sequence; returns (out [B, Hq, D], lse [B, Hq])."""
    B, Hq, D = query.shape
    out = np.zeros((B, Hq, D))
    lse = np.full((B, Hq), -np.inf)
    for s in range(B):
        k, v = np.asarray(keys_by_seq[s], np.float64), np.asarray(values_by_seq[s], np.float64)
        if k.shape[0] == 0:
            continue
        group = Hq // k.shape[1]
        for h in range(Hq):
            scores = k[:, h // group, :] @ np.asarray(query[s, h], np.float64) * scale
            m = scores.max()
            p = np.exp(scores - m)
            out[s, h] = p @ v[:, h // group, :] / p.sum()
            lse[s, h] = m + np.log(p.sum())
    return out, lse


def sequence_slots(case, s):
    """The cache slots of sequence s's tokens, in order."""
    bs = case.layout.block_size
    n = int(case.seq_lens[s])
    p = np.arange(n)
    return (case.block_table[s, p // bs].astype(np.int64) * bs + p % bs).astype(np.int64)
