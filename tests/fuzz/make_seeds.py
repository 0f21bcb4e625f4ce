#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (tests/fuzz/corpus/<target>/seed_*).

Deterministic (fixed random seed) and dependency-free. The fuzzers' own finds
are merged next to these seeds by `MERGE=1 tests/fuzz/run_fuzzers.sh`.
"""
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20240607)

DESCR = {"f4": ("<f4", "f"), "f2": ("<f2", "e"), "f8": ("<f8", "d"), "i4": ("<i4", "i"), "i8": ("<i8", "q"),
         "u1": ("|u1", "B")}


def npy(kind, shape, values, version=1):
    descr, fmt = DESCR[kind]
    shape_txt = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    pre = 10 if version == 1 else 12
    header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H" if version == 1 else "<I", len(header)) + header.encode()
    return out + b"".join(struct.pack("<" + fmt, v) for v in values)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def seeds_npy():
    write("npy", "f4_2d", npy("f4", (2, 3), [rng.uniform(-2, 2) for _ in range(6)]))
    write("npy", "f2_1d", npy("f2", (8,), [rng.uniform(-2, 2) for _ in range(8)]))
    write("npy", "f8_3d", npy("f8", (1, 2, 2), [rng.uniform(-2, 2) for _ in range(4)]))
    write("npy", "i4", npy("i4", (4,), [0, -1, 2**31 - 1, 7]))
    write("npy", "i8", npy("i8", (3,), [-1, 2**40, 5]))
    write("npy", "u1_4d", npy("u1", (1, 2, 1, 4), list(range(8))))
    write("npy", "scalar", npy("f4", (), [1.5]))
    write("npy", "empty", npy("i4", (0, 3), []))
    write("npy", "v2", npy("i4", (2,), [1, 2], version=2))
    write("npy", "v3", npy("f4", (2,), [1, 2], version=3))


def case_files(preset, head_dim, block_size, hk, group, seq_lens, kbits_codebook, extra_meta=None):
    """A small synthetic case directory (random cache bytes, consistent shapes).

    extra_meta: meta.json keys added as given (layout, fp8_format,
    sliding_window, or keys and values the loader must refuse)."""
    slot = {"turboquant_k8v4": head_dim + head_dim // 2 + 4,
            "turboquant_4bit_nc": head_dim // 2 + head_dim // 2 + 6,
            "turboquant_k3v4_nc": head_dim * 3 // 8 + head_dim // 2 + 6,
            "turboquant_3bit_nc": head_dim * 3 // 8 + head_dim * 3 // 8 + 6}[preset]
    b, hq = len(seq_lens), hk * group
    max_blocks = max(1, max((l + block_size - 1) // block_size for l in seq_lens))
    num_blocks = b * max_blocks + 1
    table = list(range(num_blocks - 1))
    rng.shuffle(table)
    n = sum(seq_lens)
    meta = {"preset": preset, "head_dim": head_dim, "block_size": block_size, "num_kv_heads": hk,
            "num_q_heads": hq, "scale": head_dim ** -0.5, "num_kv_splits": rng.choice([1, 4, 32])}
    meta.update(extra_meta or {})
    cents = sorted(rng.gauss(0, head_dim ** -0.5) for _ in range(2 ** kbits_codebook))
    slots = []
    for s, l in enumerate(seq_lens):
        for t in range(l):
            slots.append(table[s * max_blocks + t // block_size] * block_size + t % block_size)
    return [
        (0, json.dumps(meta).encode()),
        (1, npy("f4", (b, hq, head_dim), [rng.gauss(0, 1) for _ in range(b * hq * head_dim)])),
        (2, npy("i4", (b, max_blocks), table[: b * max_blocks])),
        (3, npy("i4", (b,), seq_lens)),
        (4, npy("u1", (num_blocks, block_size, hk, slot), [rng.randrange(256) for _ in range(num_blocks * block_size * hk * slot)])),
        (5, npy("f2", (n, hk, head_dim), [rng.gauss(0, 1) for _ in range(n * hk * head_dim)])),
        (6, npy("f4", (n, hk, head_dim), [rng.gauss(0, 1) for _ in range(n * hk * head_dim)])),
        (7, npy("i8", (n,), slots)),
        (8, npy("f4", (len(cents),), cents)),
    ]


def pack_case(files):
    out = b""
    for index, data in files:
        out += bytes([index]) + struct.pack("<I", len(data)) + data
    return out


def seeds_case_dir():
    write("case_dir", "4bit_d32", pack_case(case_files("turboquant_4bit_nc", 32, 4, 1, 2, [5, 0], 4)))
    write("case_dir", "k8v4_d32", pack_case(case_files("turboquant_k8v4", 32, 2, 2, 1, [3], 4)))
    write("case_dir", "k3v4_d32", pack_case(case_files("turboquant_k3v4_nc", 32, 3, 1, 4, [7, 1], 3)))
    write("case_dir", "3bit_d64", pack_case(case_files("turboquant_3bit_nc", 64, 1, 1, 1, [2], 3)))
    write("case_dir", "meta_only", pack_case(case_files("turboquant_4bit_nc", 32, 4, 1, 2, [5], 4)[:1]))


def seeds_api(target):
    # The targets map any bytes to a problem; the first byte is a mode mask
    # (see fuzz_decode.hpp / fuzz_encode.hpp). Cover each mode bit with a
    # few random tails of different lengths.
    for mode in [0x00, 0x00, 0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x62]:
        for length in (48, 400):
            tail = bytes(rng.randrange(256) for _ in range(length))
            write(target, "m%02x_%d" % (mode, length), bytes([mode]) + tail)


def seeds_case_dir_aos():
    # The meta.json keys of the AoS cases (2026-12-01): the layout, the FP8
    # flavour, a sliding window (refused as unsupported), and values and keys
    # the loader must refuse by name.
    write("case_dir", "aos_4bit_d32", pack_case(case_files("turboquant_4bit_nc", 32, 4, 1, 2, [5, 0], 4, {"layout": "aos"})))
    write("case_dir", "aos_k3v4_d64", pack_case(case_files("turboquant_k3v4_nc", 64, 3, 2, 1, [4], 3, {"layout": "aos"})))
    write("case_dir", "aos_k8v4_e4b15", pack_case(case_files("turboquant_k8v4", 32, 2, 2, 1, [3], 4,
                                                             {"layout": "aos", "fp8_format": "e4b15"})))
    write("case_dir", "soa_k8v4_e4m3", pack_case(case_files("turboquant_k8v4", 32, 2, 1, 2, [2], 4,
                                                            {"layout": "soa", "fp8_format": "e4m3"})))
    write("case_dir", "aos_window", pack_case(case_files("turboquant_4bit_nc", 32, 4, 1, 2, [5], 4,
                                                         {"layout": "aos", "sliding_window": 4})))
    write("case_dir", "bad_layout", pack_case(case_files("turboquant_3bit_nc", 32, 2, 1, 1, [3], 3, {"layout": "AoS"})[:1]))
    write("case_dir", "bad_fp8_on_mse", pack_case(case_files("turboquant_4bit_nc", 32, 2, 1, 1, [3], 4,
                                                             {"fp8_format": "e4b15"})[:1]))
    write("case_dir", "bad_fp8_value", pack_case(case_files("turboquant_k8v4", 32, 2, 1, 1, [3], 4,
                                                            {"layout": "aos", "fp8_format": 15})[:1]))
    write("case_dir", "unknown_key", pack_case(case_files("turboquant_4bit_nc", 32, 2, 1, 1, [3], 4,
                                                          {"layout": "aos", "window": 8})[:1]))


def seeds_api_formats(target):
    # The byte after the mode picks the format (fuzz_format): preset = byte % 6
    # (kAllPresets order, then two custom kinds), bit 3 AoS, bit 4 e4b15 (FP8
    # keys), bits 5-7 all set an invalid layout or flavour. One seed per
    # preset in AoS (k8v4 with both flavours), and the invalid ones.
    def format_byte(preset, aos, e4b15, wild=False):
        return next(c for c in range(256) if c % 6 == preset and bool(c & 0x08) == aos and bool(c & 0x10) == e4b15
                    and ((c >> 5) == 7) == wild)
    for name, choice in [("aos_k8v4", format_byte(0, True, False)), ("aos_k8v4_e4b15", format_byte(0, True, True)),
                         ("soa_k8v4_e4b15", format_byte(0, False, True)), ("aos_4bit", format_byte(1, True, False)),
                         ("aos_k3v4", format_byte(2, True, False)), ("aos_3bit", format_byte(3, True, False)),
                         ("aos_custom", format_byte(4, True, True)), ("bad_layout", format_byte(1, True, False, True)),
                         ("bad_fp8", format_byte(0, False, True, True)), ("e4b15_on_mse", format_byte(2, False, False, True))]:
        for mode in (0x00, 0x80):
            tail = bytes(rng.randrange(256) for _ in range(300))
            write(target, "f%s_m%02x" % (name, mode), bytes([mode, choice]) + tail)


if __name__ == "__main__":
    seeds_npy()
    seeds_case_dir()
    seeds_api("decode")
    seeds_api("encode")
    # Written last, so that the seeds above keep their bytes (one random stream).
    seeds_case_dir_aos()
    seeds_api_formats("decode")
    seeds_api_formats("encode")
    sys.exit(0)
