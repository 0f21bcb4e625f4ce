"""Array-library plumbing: which library an array comes from, allocating outputs
next to it, the CUDA stream a call runs on, and host (numpy) copies.

The C++ extension takes any DLPack / buffer-protocol array as it is (torch
tensors through torch's DLPack exchange table or its C exporter: the extension's
dlpack_exchange.hpp), and takes torch's current stream itself; only allocation,
CuPy's current stream and host copies depend on the library here."""

from __future__ import annotations

import sys

import numpy as np



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


def name_the_array(arrays):
    """After the extension refused its arguments (nanobind's TypeError lists signatures, not
    the argument): TypeError naming the first of `arrays` ((name, array) pairs; None
    skipped) that is no array, or that its library cannot hand over (a torch tensor on the
    meta device, a sparse one: torch's own reason). Returns when all look fine."""
    for name, x in arrays:
        if x is None:
            continue
        require_array(name, x)
        torch = torch_module(x)
        if torch is not None:
            try:
                torch._C._to_dlpack(x)
            except Exception as e:  # noqa: BLE001 (torch raises BufferError, RuntimeError, ...)
                raise TypeError(f"{name}: torch cannot hand this tensor over through DLPack "
                                f"({type(e).__name__}: {e})") from None


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


OUTPUT_DTYPES = ("float32", "float16", "bfloat16")


def output_dtype(dtype):
    """The name in OUTPUT_DTYPES of a `dtype=` argument: the name itself, a numpy dtype or
    scalar type (np.float16, JAX's jnp.bfloat16), or a torch dtype (torch.bfloat16); else
    ValueError naming the value."""
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__ == "torch":  # torch.dtype: str() is "torch.float16"
        name = str(dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(dtype).name if dtype is not None else None
        except TypeError:
            name = None
    if name not in OUTPUT_DTYPES:
        raise ValueError(f"dtype = {dtype!r} is not one of {', '.join(map(repr, OUTPUT_DTYPES))}")
    return name


def empty(ref, shape, dtype):
    """An uninitialized array of `shape` and `dtype` (a name in OUTPUT_DTYPES) from the
    library and device of `ref`."""
    torch = torch_module(ref)
    if torch is not None:
        return torch.empty(shape, dtype=getattr(torch, dtype), device=ref.device)
    if isinstance(ref, np.ndarray):
        if dtype == "bfloat16":
            raise TypeError("dtype = 'bfloat16': numpy has no bfloat16; with numpy arrays use 'float32' or "
                            "'float16' (torch and JAX arrays take 'bfloat16')")
        return np.empty(shape, dtype=dtype)
    namespace = getattr(ref, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        xp_dtype = getattr(xp, dtype, None)
        if xp_dtype is None:
            raise TypeError(f"dtype = {dtype!r}: {xp.__name__} has no {dtype}")
        return xp.empty(shape, dtype=xp_dtype, device=ref.device)
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
    """The cudaStream_t (as an int) a call runs on, or None to leave it to the extension:
    `stream` itself (an int, a torch.cuda.Stream or a CuPy stream), else CuPy's current
    stream for a CuPy `ref`, else None: the extension takes torch's current stream on
    the call's device for a torch `ref` (through the DLPack exchange table where torch
    has one: no Python call) and the legacy default stream (0) for anything else."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            handle = getattr(stream, attribute, None)
            if isinstance(handle, int):
                return handle
        raise TypeError(f"stream: expected an int handle, a torch.cuda.Stream or a CuPy stream, "
                        f"got {type(stream).__name__}")
    if type(ref) is np.ndarray:
        return None
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(ref, cupy.ndarray):
        return cupy.cuda.get_current_stream().ptr
    return None


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
