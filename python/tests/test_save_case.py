"""save_case / load_case: round trips, `tq validate DIR` on a saved case, and the
loader's refusals (naming the file and key)."""

import json
import shutil

import numpy as np
import pytest

import turboquant as tq
from conftest import case_params, load

ARRAYS = ("query", "kv_cache", "block_table", "seq_lens", "keys", "values", "slot_mapping", "expected_out",
          "expected_lse", "reference_out_f64", "centroids")
SOME = case_params("vllm-soa")[:1] + case_params("vllm-aos")[-1:]  # includes k8v4 e4b15 (a06)


def _save(c, path, output=None, **kw):
    return tq.save_case(path, layout=c.layout, query=c.query, kv_cache=c.kv_cache, block_table=c.block_table,
                        seq_lens=c.seq_lens, scale=c.scale, num_splits=c.num_splits, keys=c.keys, values=c.values,
                        slot_mapping=c.slot_mapping, expected_out=c.expected_out if output is None else output,
                        expected_lse=c.expected_lse, reference_out_f64=c.reference_out_f64, centroids=c.centroids,
                        **kw)


@pytest.mark.parametrize("path", SOME)
def test_round_trip(path, tmp_path):
    c = load(path)
    target = tmp_path / "case"
    saved = _save(c, target, source="pytest")
    assert isinstance(saved, tq.Case)
    again = tq.load_case(target)
    for got in (saved, again):
        assert got.layout == c.layout
        assert (got.scale, got.num_splits, got.num_q_heads) == (c.scale, c.num_splits, c.num_q_heads)
        assert got.source == "pytest"
        for name in ARRAYS:
            a, b = getattr(got, name), getattr(c, name)
            assert a.dtype == b.dtype and a.shape == b.shape, name
            np.testing.assert_array_equal(a, b, err_msg=name)
    meta = json.loads((target / "meta.json").read_text())
    assert meta["layout"] == c.layout.layout
    assert meta.get("fp8_format") == (c.layout.fp8_format if c.layout.fp8_keys else None)


@pytest.mark.parametrize("path", SOME)
def test_tq_validate_saved_case(path, tmp_path, run_tq, tq_json):
    c = load(path)
    out = tq.decode(*c.decode_args(), scale=c.scale, num_splits=c.num_splits, backend="cpu")
    _save(c, tmp_path / "good", output=out)
    r = run_tq("validate", tmp_path / "good")
    assert r.returncode == 0, r.stdout + r.stderr
    j = tq_json("validate", tmp_path / "good")
    assert j["vs_golden"]["rel_l2"] == 0.0
    bad = out.copy()
    bad[0] *= -1
    _save(c, tmp_path / "bad", output=bad)
    assert run_tq("validate", tmp_path / "bad").returncode == 1


def test_minimal_case_and_defaults(small_case, tmp_path, run_tq):
    c = small_case
    saved = tq.save_case(tmp_path / "m", layout=c.layout, query=c.query, kv_cache=c.kv_cache,
                         block_table=c.block_table, seq_lens=c.seq_lens)
    assert saved.scale == pytest.approx(1 / np.sqrt(c.layout.head_dim), rel=1e-15)
    assert saved.num_splits == 32
    assert saved.keys is None and saved.expected_out is None
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == \
        ["block_table.npy", "kv_cache.npy", "meta.json", "query.npy", "seq_lens.npy"]


def test_empty_dir_accepted(small_case, tmp_path):
    (tmp_path / "e").mkdir()
    _save(small_case, tmp_path / "e")
    assert (tmp_path / "e" / "meta.json").is_file()


def test_refuses_non_empty_dir(small_case, tmp_path):
    target = tmp_path / "c"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        _save(small_case, target)
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]


def test_refuses_a_file(small_case, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        _save(small_case, f)


def test_overwrite_replaces_and_removes(small_case, tmp_path):
    c = small_case
    target = tmp_path / "c"
    _save(c, target)
    assert (target / "keys.npy").is_file()
    out = np.zeros_like(c.expected_out)
    saved = tq.save_case(target, layout=c.layout, query=c.query, kv_cache=c.kv_cache, block_table=c.block_table,
                         seq_lens=c.seq_lens, scale=c.scale, expected_out=out, overwrite=True)
    assert not (target / "keys.npy").exists() and not (target / "reference_out_f64.npy").exists()
    assert saved.keys is None
    np.testing.assert_array_equal(saved.expected_out, out)


def test_save_case_bad_arguments(small_case, tmp_path):
    c = small_case
    with pytest.raises(TypeError, match="layout"):
        tq.save_case(tmp_path / "a", layout="soa", query=c.query, kv_cache=c.kv_cache, block_table=c.block_table,
                     seq_lens=c.seq_lens)
    with pytest.raises(ValueError, match="query"):
        tq.save_case(tmp_path / "b", layout=c.layout, query=c.query[0], kv_cache=c.kv_cache,
                     block_table=c.block_table, seq_lens=c.seq_lens)
    with pytest.raises(ValueError, match="expected_out"):  # read back through the loader's checks
        tq.save_case(tmp_path / "c", layout=c.layout, query=c.query, kv_cache=c.kv_cache,
                     block_table=c.block_table, seq_lens=c.seq_lens, expected_out=c.expected_out[:, :1])


# --- load_case refusals ---

@pytest.fixture
def case_copy(small_case, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(small_case.path, target)
    return target


def _edit_meta(path, edit):
    meta = json.loads((path / "meta.json").read_text())
    edit(meta)
    (path / "meta.json").write_text(json.dumps(meta))


def test_load_copy_ok(case_copy, small_case):
    c = tq.load_case(case_copy)
    assert c.layout == small_case.layout and str(case_copy) in c.path


def test_load_unknown_key(case_copy):
    _edit_meta(case_copy, lambda m: m.update(colour="blue"))
    with pytest.raises(ValueError, match="(?s)(meta.json.*colour|colour.*meta.json)"):
        tq.load_case(case_copy)


def test_load_num_kv_splits_defaults_to_32(case_copy):
    _edit_meta(case_copy, lambda m: m.update(num_kv_splits=8))
    assert tq.load_case(case_copy).num_splits == 8
    _edit_meta(case_copy, lambda m: m.pop("num_kv_splits"))
    assert tq.load_case(case_copy).num_splits == 32


@pytest.mark.parametrize("key", ["preset", "scale", "num_q_heads", "head_dim", "block_size", "num_kv_heads"])
def test_load_missing_key(case_copy, key):
    _edit_meta(case_copy, lambda m: m.pop(key))
    with pytest.raises(ValueError, match=f"(?s)(meta.json.*{key}|{key}.*meta.json)"):
        tq.load_case(case_copy)


@pytest.mark.parametrize("key,value", [("preset", "turboquant_9bit"), ("layout", "diagonal"), ("head_dim", 100),
                                       ("fp8_format", "e5m2")])
def test_load_bad_value(case_copy, key, value):
    _edit_meta(case_copy, lambda m: m.update({key: value}))
    with pytest.raises(ValueError, match=str(value)):
        tq.load_case(case_copy)


def test_load_bad_json(case_copy):
    (case_copy / "meta.json").write_text("{ not json")
    with pytest.raises(ValueError, match="meta.json"):
        tq.load_case(case_copy)


def test_load_array_disagrees(case_copy, small_case):
    np.save(case_copy / "query.npy", small_case.query[:, :, :32].copy())
    with pytest.raises(ValueError, match="query.npy"):
        tq.load_case(case_copy)


def test_load_array_bad_dtype(case_copy, small_case):
    np.save(case_copy / "kv_cache.npy", small_case.kv_cache.astype(np.int16))
    with pytest.raises(ValueError, match="kv_cache.npy"):
        tq.load_case(case_copy)


def test_load_absent_file_is_none(case_copy):
    (case_copy / "expected_lse.npy").unlink()
    c = tq.load_case(case_copy)
    assert c.expected_lse is None and c.expected_out is not None
    assert "'expected_lse'" not in repr(c)


def test_load_no_directory(tmp_path):
    with pytest.raises(ValueError, match="nowhere"):
        tq.load_case(tmp_path / "nowhere")


def test_load_accepts_pathlike_and_str(small_case):
    assert tq.load_case(str(small_case.path)).layout == tq.load_case(small_case.path).layout
