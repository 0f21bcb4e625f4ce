"""turboquant.Layout, codebook, backends, isas, cuda_built."""

import json
import math

import numpy as np
import pytest

import turboquant as tq
from conftest import DATA

# (args, expected properties): docs/FORMAT.md §2, §6 and §7.
KNOWN = [
    (("4bit_nc", 128, 16, 8),
     dict(preset="turboquant_4bit_nc", head_dim=128, block_size=16, num_kv_heads=8, layout="soa", key_bits=4,
          value_bits=4, norm_correction=True, fp8_keys=False, key_norm_stored="corrected", key_data_bytes=64,
          value_data_bytes=64, data_bytes=128, meta_fields=3, slot_bytes=134, slot_bytes_aligned=134,
          key_packed_size=66, value_packed_size=68, block_bytes=17152, meta_offset=16384)),
    (("turboquant_4bit_nc", 128, 16, 8, "aos"),
     dict(layout="aos", key_norm_stored="raw", slot_bytes=134, block_bytes=17152, meta_offset=17152,
          key_packed_size=66)),
    (("k8v4", 128, 16, 1, "aos"),
     dict(preset="turboquant_k8v4", key_bits=8, value_bits=4, fp8_keys=True, fp8_format="e4m3", norm_correction=False,
          key_norm_stored="none", key_data_bytes=128, value_data_bytes=64, data_bytes=192, meta_fields=2,
          slot_bytes=196, slot_bytes_aligned=196, key_packed_size=128, value_packed_size=68, block_bytes=16 * 196)),
    (("k8v4", 128, 16, 2, "aos", "e4b15"), dict(fp8_format="e4b15", fp8_keys=True, slot_bytes=196, block_bytes=6272)),
    (("k8v4", 64, 16, 1), dict(slot_bytes=100, meta_offset=16 * 96)),
    (("k8v4", 256, 16, 1), dict(slot_bytes=388)),
    (("4bit_nc", 64, 16, 1), dict(slot_bytes=70)),
    (("4bit_nc", 256, 16, 1), dict(slot_bytes=262)),
    (("k3v4_nc", 64, 32, 4),
     dict(preset="turboquant_k3v4_nc", key_bits=3, value_bits=4, key_data_bytes=24, value_data_bytes=32, slot_bytes=62,
          block_bytes=32 * 4 * 62, meta_offset=32 * 4 * 56, key_packed_size=26, value_packed_size=36)),
    (("k3v4_nc", 128, 16, 1), dict(slot_bytes=118)),
    (("k3v4_nc", 256, 16, 1), dict(slot_bytes=230)),
    (("3bit_nc", 64, 16, 1), dict(slot_bytes=54)),
    (("3bit_nc", 128, 16, 1), dict(slot_bytes=102, key_bits=3, value_bits=3)),
    (("3bit_nc", 256, 16, 2), dict(slot_bytes=198, block_bytes=16 * 2 * 198, meta_offset=16 * 2 * 192)),
]


@pytest.mark.parametrize("args,want", KNOWN, ids=["-".join(map(str, a)) for a, _ in KNOWN])
def test_known_numbers(args, want):
    layout = tq.Layout(*args)
    for name, value in want.items():
        assert getattr(layout, name) == value, name


def test_worked_example_compression_and_description():
    layout = tq.Layout("4bit_nc", 128, 16, 8)
    assert layout.compression_vs_bf16 == pytest.approx(512 / 134, rel=1e-12)
    assert "SoA" in layout.description and "head_dim 128" in layout.description
    assert "AoS" in tq.Layout("4bit_nc", 128, 16, 8, "aos").description


def test_cache_shape():
    layout = tq.Layout("4bit_nc", 128, 16, 8)
    assert layout.cache_shape(5) == (5, 16, 8, 134)
    assert layout.cache_shape(0) == (0, 16, 8, 134)
    assert math.prod(layout.cache_shape(3)) == 3 * layout.block_bytes
    with pytest.raises(ValueError, match="num_blocks"):
        layout.cache_shape(-1)


def test_defaults_and_short_names():
    a = tq.Layout("4bit_nc", 128, 16, 2)
    b = tq.Layout("turboquant_4bit_nc", 128, 16, 2, "soa", "e4m3")
    assert a == b and hash(a) == hash(b)
    assert a.layout == "soa" and a.fp8_format == "e4m3"
    assert tq.Layout(preset="k8v4", head_dim=128, block_size=16, num_kv_heads=2, layout="aos") == \
        tq.Layout("turboquant_k8v4", 128, 16, 2, "aos")


@pytest.mark.parametrize("other", [
    ("4bit_nc", 128, 16, 2, "aos"), ("4bit_nc", 64, 16, 2), ("4bit_nc", 128, 32, 2), ("4bit_nc", 128, 16, 4),
    ("3bit_nc", 128, 16, 2), ("k8v4", 128, 16, 2),
])
def test_inequality(other):
    base = tq.Layout("4bit_nc", 128, 16, 2)
    assert base != tq.Layout(*other)
    assert len({base, tq.Layout(*other)}) == 2


def test_fp8_flavour_distinguishes():
    a, b = tq.Layout("k8v4", 128, 16, 2, "aos", "e4m3"), tq.Layout("k8v4", 128, 16, 2, "aos", "e4b15")
    assert a != b
    assert {a: 1, b: 2}[tq.Layout("k8v4", 128, 16, 2, "aos", "e4b15")] == 2


def test_repr():
    assert repr(tq.Layout("4bit_nc", 128, 16, 8)) == \
        "turboquant.Layout(preset='turboquant_4bit_nc', head_dim=128, block_size=16, num_kv_heads=8, layout='soa')"
    assert repr(tq.Layout("k8v4", 64, 32, 2, "aos", "e4b15")) == \
        ("turboquant.Layout(preset='turboquant_k8v4', head_dim=64, block_size=32, num_kv_heads=2, layout='aos', "
         "fp8_format='e4b15')")


@pytest.mark.parametrize("args", [("4bit_nc", 128, 16, 8), ("k8v4", 64, 1, 3, "aos", "e4b15"), ("3bit_nc", 256, 128, 1)])
def test_repr_round_trips(args):
    layout = tq.Layout(*args)
    assert eval(repr(layout), {"turboquant": tq}) == layout


def test_properties_read_only():
    layout = tq.Layout("4bit_nc", 128, 16, 8)
    with pytest.raises(AttributeError):
        layout.block_size = 32


INFO_CASES = [
    ("4bit_nc", 128, 16, 8, "soa", "e4m3"), ("4bit_nc", 128, 16, 8, "aos", "e4m3"),
    ("k8v4", 128, 16, 2, "soa", "e4m3"), ("k8v4", 128, 16, 2, "aos", "e4b15"), ("k8v4", 96, 7, 3, "soa", "e4m3"),
    ("k3v4_nc", 64, 32, 4, "soa", "e4m3"), ("k3v4_nc", 256, 1, 1, "aos", "e4m3"),
    ("3bit_nc", 256, 16, 2, "soa", "e4m3"), ("3bit_nc", 512, 64, 5, "aos", "e4m3"),
]


@pytest.mark.parametrize("preset,D,bs,hk,kind,fp8", INFO_CASES)
def test_against_tq_info(tq_json, preset, D, bs, hk, kind, fp8):
    info = tq_json("info", "--preset", preset, "--head-dim", D, "--block-size", bs, "--kv-heads", hk,
                   "--layout", kind, "--fp8-format", fp8)
    layout = tq.Layout(preset, D, bs, hk, kind, fp8)
    same = ["block_bytes", "block_size", "compression_vs_bf16", "data_bytes", "description", "fp8_keys", "head_dim",
            "key_bits", "key_data_bytes", "key_norm_stored", "layout", "meta_fields", "norm_correction", "preset",
            "slot_bytes", "slot_bytes_aligned", "value_bits", "value_data_bytes"]
    for name in same:
        assert getattr(layout, name) == info[name], name
    assert layout.num_kv_heads == info["kv_heads"]
    assert layout.slot_bytes_aligned == info["bytes_per_token_head"]
    if kind == "soa":
        assert layout.meta_offset == info["meta_offset"]
    if layout.fp8_keys:
        assert layout.fp8_format == info["fp8_format"]


BAD_LAYOUTS = [
    (("bogus", 128, 16, 1), "bogus"),
    (("turboquant_5bit", 128, 16, 1), "turboquant_5bit"),
    (("4bit_nc", 128, 16, 1, "xyz"), "xyz"),
    (("4bit_nc", 128, 16, 1, "soa", "e5m2"), "e5m2"),
    (("4bit_nc", 128, 16, 1, "soa", "e4b15"), "e4b15"),
    (("4bit_nc", 100, 16, 1), "100"),
    (("4bit_nc", 96, 16, 1), "96"),
    (("k8v4", 16, 16, 1), "16"),
    (("k8v4", 528, 16, 1), "528"),
    (("4bit_nc", 128, 0, 1), "block_size"),
    (("4bit_nc", 128, 5000, 1), "5000"),
    (("4bit_nc", 128, 16, 0), "num_kv_heads"),
]


@pytest.mark.parametrize("args,named", BAD_LAYOUTS, ids=[str(n) + "-" + str(a[1:]) for a, n in BAD_LAYOUTS])
def test_bad_layout(args, named):
    with pytest.raises(ValueError, match=named):
        tq.Layout(*args)


def test_head_dim_non_power_of_two_only_for_fp8_keys():
    assert tq.Layout("k8v4", 96, 16, 1).head_dim == 96
    with pytest.raises(ValueError, match="power-of-two"):
        tq.Layout("3bit_nc", 96, 16, 1)


def test_layout_type_errors():
    with pytest.raises(TypeError):
        tq.Layout("4bit_nc", "128", 16, 1)
    with pytest.raises(TypeError):
        tq.Layout(4, 128, 16, 1)


# --- codebook ---

CODEBOOKS = DATA / "vllm-codebooks.json"


def _table():
    if not CODEBOOKS.is_file():
        pytest.skip(f"{CODEBOOKS} is absent")
    with open(CODEBOOKS) as f:
        return json.load(f)["codebooks"]


def _hex_to_f32(hexes):
    return np.array([int(h, 16) for h in hexes], dtype=np.uint32).view(np.float32)


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("b", [2, 3, 4])
def test_codebook_equals_vllm_table(D, b):
    entry = _table()[f"d{D}_b{b}"]
    cb = tq.codebook(b, D)
    assert (cb.bits, cb.head_dim) == (b, D)
    assert cb.centroids.dtype == np.float32 and cb.midpoints.dtype == np.float32
    assert cb.centroids.shape == (2 ** b,) and cb.midpoints.shape == (2 ** b - 1,)
    np.testing.assert_array_equal(cb.centroids.view(np.uint32), _hex_to_f32(entry["centroids_hex"]).view(np.uint32))
    np.testing.assert_array_equal(cb.midpoints.view(np.uint32), _hex_to_f32(entry["midpoints_hex"]).view(np.uint32))


@pytest.mark.parametrize("D", [64, 128, 256, 512])
@pytest.mark.parametrize("b", [1, 2, 3, 4])
def test_codebook_midpoints_derived(D, b):
    cb = tq.codebook(b, D)
    c = cb.centroids
    assert np.all(np.diff(c) > 0)
    want = (c[:-1] + c[1:]) / np.float32(2)  # fp32 arithmetic
    assert want.dtype == np.float32
    np.testing.assert_array_equal(cb.midpoints.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(c, -c[::-1])  # symmetric, as N(0, 1/D) is


def test_case_centroids_are_vllm_codebook(data_dir):
    from conftest import case_dirs, load
    checked = 0
    for d in case_dirs():
        c = load(d)
        bits = c.layout.value_bits if c.layout.fp8_keys else c.layout.key_bits
        np.testing.assert_array_equal(c.centroids, tq.codebook(bits, c.layout.head_dim).centroids)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("b,D,named", [(0, 128, "bits"), (5, 128, "bits"), (4, 0, "head_dim"), (4, -16, "head_dim")])
def test_codebook_bad(b, D, named):
    with pytest.raises(ValueError, match=named):
        tq.codebook(b, D)


# --- registry ---

def test_backends():
    bs = tq.backends()
    names = [b.name for b in bs]
    assert len(names) == len(set(names))
    assert {"cpu-ref", "cpu:scalar"} <= set(names)
    by = {b.name: b for b in bs}
    for name in ("cpu-ref", "cpu:scalar"):
        assert by[name].available and by[name].exact_decode and by[name].reason == ""
    for b in bs:
        assert isinstance(b, tq.Backend)
        assert b.description
        assert b.available == (b.reason == ""), b
    for isa in tq.isas():
        assert by[f"cpu:{isa}"].available
    for name, b in by.items():
        if name.startswith("cpu:"):
            assert b.available == (name[4:] in tq.isas())


def test_isas():
    isas = tq.isas()
    assert isinstance(isas, list) and isas[0] == "scalar"
    assert len(isas) == len(set(isas))
    assert set(isas) <= {"scalar", "avx2", "avx512"}


def test_isas_match_tq(run_tq):
    r = run_tq("isas")
    assert r.returncode == 0
    for isa in tq.isas():
        assert isa in r.stdout


def test_cuda_built():
    built = tq.cuda_built()
    assert isinstance(built, bool)
    cuda = [b for b in tq.backends() if b.name.startswith("cuda")]
    if not built:
        assert all(not b.available for b in cuda)
        assert tq.decode_workspace_bytes(4, 8, 32, 128) == 0
