"""turboquant.validate_cache: a cache some store kernel wrote, slot by slot against the
golden encode; the same counts as `tq validate CASE --cache FILE`, every corruption
localized."""

import json
import subprocess

import numpy as np
import pytest

import turboquant as tq
from conftest import case_params, find_tq


@pytest.mark.parametrize("path", case_params())
def test_vllm_caches_pass_with_the_counts_of_tq(path):
    c = tq.load_case(path)
    r = c.validate_cache()
    assert r.ok and r.wrong == 0, r
    assert r.counts["value_codes"]["boundary_flip"] > 0  # vLLM's Triton division flips a few codes
    tq_bin = find_tq()
    if tq_bin is None:
        pytest.skip("no tq binary (set TQ_BIN)")
    res = subprocess.run([str(tq_bin), "validate", str(path), "--cache", "kv_cache.npy", "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    fields = json.loads(res.stdout)["fields"]
    for key, counts in r.counts.items():
        for k in ("identical", "boundary_flip", "one_ulp", "wrong"):
            assert counts[k] == fields[key][k], (key, k)


@pytest.mark.parametrize("path", case_params("vllm-aos")[:2] + case_params("vllm-soa")[:1])
def test_corruptions_are_localized(path):
    c = tq.load_case(path)
    L = c.layout
    slot = int(c.slot_mapping[5])
    block, pos = divmod(slot, L.block_size)
    bad = c.kv_cache.copy()
    head = 1 % L.num_kv_heads
    bad[block, pos, head, 0] ^= 0x80  # the first byte of the (block, position, head) row of the tensor
    r = c.validate_cache(bad)
    assert not r.ok and r.wrong >= 1
    item = r.wrong_items[0]
    assert item["block"] == block
    assert item["text"]
    # An unwritten block's byte is wrong too ("untouched").
    unused = sorted(set(range(bad.shape[0])) - set(int(s) // L.block_size for s in c.slot_mapping))
    bad2 = c.kv_cache.copy()
    bad2[unused[0], 0, 0, 0] = 7
    r2 = c.validate_cache(bad2)
    assert not r2.ok and r2.wrong_items[0]["field"] == "untouched" and r2.wrong_items[0]["block"] == unused[0]


def test_bad_inputs_name_the_argument():
    c = tq.load_case(case_params("vllm-aos")[0].values[0])
    with pytest.raises(ValueError, match="kv_cache"):
        tq.validate_cache(c.kv_cache[:, :, :1], c.keys, c.values, c.slot_mapping, c.layout)
    with pytest.raises(ValueError, match="slot_mapping"):
        tq.validate_cache(c.kv_cache, c.keys, c.values, c.slot_mapping[:-1], c.layout)
    with pytest.raises(ValueError, match="max_report"):
        tq.validate_cache(c.kv_cache, c.keys, c.values, c.slot_mapping, c.layout, max_report=-1)
    assert isinstance(tq.validate_cache(c.kv_cache, c.keys.astype(np.float16), c.values, c.slot_mapping, c.layout),
                      tq.CacheValidation)
