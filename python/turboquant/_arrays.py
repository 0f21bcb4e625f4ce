"""Array-library plumbing: which library an array comes from, allocating outputs
next to it, the CUDA stream a call runs on, and host (numpy) copies.

The C++ extension takes any DLPack / buffer-protocol array; only allocation and
the current stream depend on the library, so they are the only places that
know about torch, CuPy or numpy by name."""

from __future__ import annotations

import sys

import numpy as np

from . import _turboquant as _ext


def torch_module(x):
    """The torch module when `x` is a torch.Tensor, else None (torch is never imported here)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch
    return None


def require_array(name, x):
    """TypeError naming `name` unless `x` is an array the extension can take."""
    if isinstance(x, np.ndarray) or hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__"):
        return
    raise TypeError(f"{name}: expected an array (numpy, torch, CuPy, JAX, ...), got {type(x).__name__}")


# torch.Tensor once a tensor has been seen (torch is never imported here), whether the
# extension borrows its instances, and torch's C DLPack exporter where it does not.
_tensor_type = None
_tensor_borrowed = False
_to_dlpack = None


def dl(x):
    """What the extension is given for `x` (None stays None). A torch.Tensor: the tensor
    itself where the extension borrows it through torch's DLPack C exchange table (torch
    >= 2.10: no capsule, no allocation; subclasses too), else its DLPack capsule from
    torch's C exporter, which is several microseconds cheaper per tensor than
    ``Tensor.__dlpack__()`` (that one records and waits on a CUDA event whenever the
    current stream is not the legacy default stream; the library runs on the caller's
    stream, so no such handoff is needed). Anything else as it is."""
    global _tensor_type, _tensor_borrowed, _to_dlpack
    t = type(x)
    if t is _tensor_type:
        return x if _tensor_borrowed else _to_dlpack(x)
    if t is np.ndarray or x is None:
        return x
    torch = torch_module(x)
    if torch is None:
        return x
    if _tensor_type is None:
        _tensor_type = torch.Tensor
        _tensor_borrowed = _ext._borrows(torch.Tensor)
        _to_dlpack = torch._C._to_dlpack
    return x if _tensor_borrowed else _to_dlpack(x)


def require_writable(name, x):
    """ValueError naming `name` for a read-only numpy array (an output)."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError(f"{name}: the array is read-only, but the library writes it")


def require_int32(name, value):
    """`value` as an int in the library's 32-bit range, else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    value = int(value)
    if not -2**31 <= value < 2**31:
        raise ValueError(f"{name} = {value} is outside the 32-bit range [-2^31, 2^31)")
    return value


def empty(ref, shape, dtype):
    """An uninitialized array of `shape` and `dtype` ("float32", ...) from the
    library and device of `ref`."""
    torch = torch_module(ref)
    if torch is not None:
        return torch.empty(shape, dtype=getattr(torch, dtype), device=ref.device)
    if isinstance(ref, np.ndarray):
        if dtype == "bfloat16":
            raise TypeError("numpy has no bfloat16: pass out= explicitly")
        return np.empty(shape, dtype=dtype)
    namespace = getattr(ref, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        return xp.empty(shape, dtype=getattr(xp, dtype), device=ref.device)
    raise TypeError(f"cannot allocate an output next to a {type(ref).__name__}: pass out= explicitly")


def zeros(ref, shape, dtype):
    """As empty(), filled with zeros."""
    torch = torch_module(ref)
    if torch is not None:
        return torch.zeros(shape, dtype=getattr(torch, dtype), device=ref.device)
    out = empty(ref, shape, dtype)
    out[...] = 0
    return out


def stream_handle(stream, ref):
    """The cudaStream_t (as an int) a call runs on: `stream` itself (an int, a
    torch.cuda.Stream or a CuPy stream), else the array library's current
    stream for `ref`'s device, else 0 (the legacy default stream). None for a
    tensor the extension borrows (dl()): the extension asks torch's exchange
    table for that stream, without a Python call."""
    if stream is None and _tensor_borrowed and type(ref) is _tensor_type:
        return None
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            handle = getattr(stream, attribute, None)
            if isinstance(handle, int):
                return handle
        raise TypeError(f"stream: expected an int handle, a torch.cuda.Stream or a CuPy stream, "
                        f"got {type(stream).__name__}")
    torch = torch_module(ref)
    if torch is not None:
        if not ref.is_cuda:
            return 0
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(ref.get_device())
        return torch.cuda.current_stream(ref.device).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(ref, cupy.ndarray):
        return cupy.cuda.get_current_stream().ptr
    return 0


def to_numpy(x, dtype=None):
    """A host numpy copy (or view) of any array; bfloat16 becomes float32 (exactly)."""
    if x is None:
        return None
    torch = torch_module(x)
    if torch is not None:
        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        a = t.cpu().numpy()
    elif isinstance(x, np.ndarray):
        a = x
    elif hasattr(x, "get") and callable(x.get) and type(x).__module__.startswith("cupy"):
        a = x.get()
    else:
        try:
            a = np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            a = np.asarray(x)
    if dtype is not None and a.dtype != dtype:
        a = a.astype(dtype)
    return np.ascontiguousarray(a)
