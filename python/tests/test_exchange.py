"""Arrays borrowed through DLPack's C exchange table (`__dlpack_c_exchange_api__`, what
torch.Tensor publishes since torch 2.10): the extension reads them without a capsule.
Without torch, a numpy subclass publishes a table made with ctypes, so the borrowed path
runs in CI: its results equal plain numpy's bit for bit, a C-order view without strides
is read right, outputs of producers other than torch are not borrowed (a DLTensor cannot
say "read-only"), and a table the extension must not use (another major version, missing
functions, a producer that refuses the object) leaves the array to nanobind's import."""

import ctypes

import numpy as np
import pytest

import turboquant as tq
from turboquant import _turboquant as ext


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


FROM_OBJECT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class ExchangeTable(ctypes.Structure):  # DLPackExchangeAPI (dlpack.h, DLPack 1.2+)
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p),
                ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", FROM_OBJECT), ("current_work_stream", CURRENT_STREAM)]


DTYPE_CODES = {"i": 0, "u": 1, "f": 2}


class Producer:
    """A producer of DLTensor views of numpy arrays; counts the views it gave."""

    def __init__(self, major=1, omit_strides=False, refuse=False, with_functions=True):
        self.views = 0
        self.omit_strides = omit_strides
        self.refuse = refuse
        self._keep = []  # shape and stride arrays live as long as the producer
        self._from = FROM_OBJECT(self._describe)
        self._stream = CURRENT_STREAM(lambda device_type, device_id, out: 0)
        self.table = ExchangeTable(major=major, minor=3)
        if with_functions:
            self.table.dltensor_from_py_object_no_sync = self._from
            self.table.current_work_stream = self._stream

    def _describe(self, obj, out):
        if self.refuse:
            return -1
        a = np.asarray(obj)
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        strides = (ctypes.c_int64 * max(a.ndim, 1))(*(s // a.itemsize for s in a.strides))
        self._keep += [shape, strides]
        t = out.contents
        t.data = a.ctypes.data - 8 if a.ctypes.data >= 8 else a.ctypes.data  # exercise byte_offset
        t.byte_offset = a.ctypes.data - t.data
        t.device = DLDevice(1, 0)  # kDLCPU
        t.ndim = a.ndim
        t.dtype = DLDataType(DTYPE_CODES[a.dtype.kind], a.dtype.itemsize * 8, 1)
        t.shape = shape
        t.strides = None if self.omit_strides else strides
        self.views += 1
        return 0

    def array_type(self):
        """A numpy subclass whose type publishes this producer's table (as an int address)."""
        return type("Exchanged", (np.ndarray,), {"__dlpack_c_exchange_api__": ctypes.addressof(self.table)})


def small_problem():
    layout = tq.Layout("4bit_nc", 64, 16, 2)
    rng = np.random.default_rng(5)
    n = 40
    cache = np.zeros(layout.cache_shape(4), np.uint8)
    keys = rng.standard_normal((n, 2, 64)).astype(np.float32)
    values = rng.standard_normal((n, 2, 64)).astype(np.float32)
    tq.encode(cache, keys, values, np.arange(n, dtype=np.int64), layout, backend="cpu-ref")
    query = rng.standard_normal((2, 4, 64)).astype(np.float32)
    table = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    lens = np.array([40, 23], np.int32)
    return layout, query, cache, table, lens


def decode_with(make, backend="cpu"):
    layout, query, cache, table, lens = small_problem()
    out = make(np.full(query.shape, 7.0, np.float32))
    lse = make(np.full(query.shape[:2], 7.0, np.float32))
    tq.decode(make(query), make(cache), make(table), make(lens), layout, out=out, lse=lse, backend=backend)
    return np.asarray(out), np.asarray(lse)


@pytest.mark.parametrize("omit_strides", [False, True])
@pytest.mark.parametrize("backend", ["cpu-ref", "cpu"])
def test_borrowed_arrays_decode_as_numpy_does(omit_strides, backend):
    producer = Producer(omit_strides=omit_strides)
    kind = producer.array_type()
    # inputs through the table; outputs through nanobind's import: only torch's tables
    # are trusted with arrays the library writes (a DLTensor cannot say "read-only")
    assert ext._array_route(kind) == "exchange-inputs"
    want = decode_with(lambda a: a, backend)
    got = decode_with(lambda a: a.view(kind), backend)
    assert producer.views == 4  # query, cache, table, lens
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_borrowed_arrays_keep_the_named_errors():
    kind = Producer().array_type()
    layout, query, cache, table, lens = small_problem()
    with pytest.raises(TypeError, match="query: dtype float64 is not one of float32, float16"):
        tq.decode(query.astype(np.float64).view(kind), cache.view(kind), table.view(kind), lens.view(kind), layout)
    with pytest.raises(ValueError, match="not C-contiguous"):
        tq.decode(np.swapaxes(np.swapaxes(query, 0, 1).copy(), 0, 1).view(kind), cache, table, lens, layout)


@pytest.mark.parametrize("producer", [
    Producer(major=2),                # a DLTensor ABI this extension does not know
    Producer(with_functions=False),   # no dltensor_from_py_object_no_sync
    Producer(refuse=True),            # the producer refuses the object
], ids=["major-2", "no-functions", "refuses"])
def test_tables_the_extension_must_not_use_leave_the_import(producer):
    kind = producer.array_type()
    # the one usable table is the refusing producer's: it says no per object
    assert ext._array_route(kind) == ("exchange-inputs" if producer.refuse else "import")
    want = decode_with(lambda a: a)
    got = decode_with(lambda a: a.view(kind))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_numpy_arrays_are_imported_and_run_on_no_stream():
    assert ext._array_route(np.ndarray) == "import"
    assert tq._arrays.stream_handle(None, np.zeros(2)) is None  # the extension: 0 on host arrays
    assert ext._current_stream(np.zeros(2)) == 0


def test_an_attribute_that_is_no_table_is_ignored():
    for value in ("not a table", 0, None):
        kind = type("Odd", (np.ndarray,), {"__dlpack_c_exchange_api__": value})
        assert ext._array_route(kind) == "import"
        got = decode_with(lambda a: a.view(kind))
        np.testing.assert_array_equal(got[0], decode_with(lambda a: a)[0])


def test_more_array_types_than_the_route_memo_holds():
    """The extension remembers the routes of 16 types; later ones are looked up on every
    call and must still take their route (a table each: 24 producers, inputs borrowed)."""
    producers = [Producer() for _ in range(24)]
    want = decode_with(lambda a: a)
    for p in producers:
        kind = p.array_type()
        for _ in range(2):
            got = decode_with(lambda a, kind=kind: a.view(kind))
            np.testing.assert_array_equal(got[0], want[0])
        assert ext._array_route(kind) == "exchange-inputs"
        assert p.views == 8  # 4 inputs, twice
