"""What the torch test files share: the shared vLLM case directories, the golden
decode and case arrays as torch tensors. Imported after pytest.importorskip("torch")."""

import glob
import os

import numpy as np
import pytest
import torch

import turboquant as tq

DATA = os.environ.get("TQ_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
SOA = sorted(glob.glob(os.path.join(DATA, "vllm-soa", "*", "meta.json")))
AOS = sorted(glob.glob(os.path.join(DATA, "vllm-aos", "*", "meta.json")))
CASES = [os.path.dirname(p) for p in SOA + AOS]

cuda = pytest.mark.skipif(not (torch.cuda.is_available() and tq.cuda_built()), reason="needs a GPU and a CUDA build")


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def golden(case, **kw):
    return tq.decode(*case.decode_args(), scale=case.scale, num_splits=case.num_splits, backend="cpu-ref", **kw)


def on(device, case):
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return t(case.query), t(case.kv_cache), t(case.block_table), t(case.seq_lens)
