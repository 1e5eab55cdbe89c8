"""Arrays on a GPU: ``yota.to_device``, and how ``yota.grad``/``yota.compile`` run a program
on CuPy arrays.

A function called with CuPy arrays runs on the CUDA backend, with no change to the code:
the arguments' signature (structure, dtypes, shapes) is taken from the device arrays,
tracing runs on host copies (tracing needs real values: Python control flow sees them),
and the compiled program reads the device arrays where they are. Outputs and gradients
are CuPy arrays. Host and device arrays in one call are an error naming both; Python
floats and NumPy scalars go with either.

CuPy is imported only when the caller has imported it already (or asks for "cuda").

    >>> import numpy as np, yota
    >>> yota.to_device({"w": np.ones(2), "n": 3}, "cpu")
    {'w': array([1., 1.]), 'n': 3}
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from yota.ir.errors import YotaError

from . import structs

Path = tuple[Any, ...]


def _cupy(required: bool = False) -> Any:
    if "cupy" in sys.modules:
        return sys.modules["cupy"]
    if not required:
        return None
    try:
        import cupy
    except ImportError as e:
        raise YotaError("CUDA arrays need CuPy: pip install 'yota[cuda]' "
                        f"(cupy-cuda13x and nvidia-cuda-nvrtc) ({e})") from None
    return cupy


def is_device_array(x: Any) -> bool:
    """A CuPy array (or another array living on a GPU: ``__cuda_array_interface__``)."""
    if isinstance(x, np.ndarray):
        return isinstance(x, _DeviceLeaf)
    cp = _cupy()
    if cp is not None and isinstance(x, cp.ndarray):
        return True
    return hasattr(type(x), "__cuda_array_interface__")


def _is_leaf(x: Any) -> bool:
    return structs.is_leaf(x) or is_device_array(x)


def rebuild(x: Any, fn: Callable[[Path, Any], Any], path: Path = ()) -> Any:
    """A copy of structure ``x`` with each leaf (host or device array, float) replaced by
    ``fn(path, leaf)``; containers are shallow-copied, never mutated."""
    if _is_leaf(x):
        return fn(path, x)
    kids = structs.children(x)
    if kids is None:
        return x
    new = {k: rebuild(v, fn, path + (k,)) for k, v in kids}
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return type(x)(*new.values())
    if isinstance(x, tuple):
        return tuple(new.values())
    if isinstance(x, list):
        return list(new.values())
    if isinstance(x, dict):
        return {k: new[k] for k, _ in kids}
    if dataclasses.is_dataclass(x) or hasattr(x, "__dict__"):
        out = copy.copy(x)
        for k, v in new.items():
            object.__setattr__(out, k, v)
        return out
    return x


def leaves(x: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    out: list[tuple[Path, Any]] = []
    rebuild(x, lambda p, v: out.append((p, v)), path)
    return out


def to_device(obj: Any, device: str = "cuda", dtype: Any = None) -> Any:
    """``obj`` with every array inside it (any structure) moved to ``device`` ("cuda" or
    "cpu"). Dtypes are kept unless ``dtype`` is given: then floating arrays are converted
    to it (integer and bool arrays keep theirs). Python floats and other values are left
    as they are (Yota.jl's ``to_cuda``).

    >>> import numpy as np, yota
    >>> yota.to_device([np.ones(2), np.arange(2)], "cpu", dtype=np.float32)
    [array([1., 1.], dtype=float32), array([0, 1])]
    """
    if device not in ("cuda", "cpu"):
        raise YotaError(f"to_device: device must be 'cuda' or 'cpu', got {device!r}")
    dt = np.dtype(dtype) if dtype is not None else None
    cp = _cupy(required=device == "cuda")
    if device == "cuda":
        _require_gpu()

    def move(path: Path, x: Any) -> Any:
        if type(x) is float or isinstance(x, np.generic):
            return x
        if device == "cpu":
            arr = _host(x)
        else:
            arr = x if isinstance(x, cp.ndarray) else cp.asarray(_host(x))
        if dt is not None and arr.dtype.kind == "f" and arr.dtype != dt:
            arr = arr.astype(dt)
        return arr
    return rebuild(obj, move)


def _require_gpu() -> None:
    """Raise ``CudaUnavailable`` (a ``YotaError``) with the reason when no CUDA device can
    be used here, instead of CuPy's raw runtime error at the first copy."""
    from yota.backends import cuda
    from yota.backends.cuda.nvrtc import CudaUnavailable

    reason = cuda.unavailable()
    if reason is not None:
        raise CudaUnavailable(f"to_device(..., 'cuda'): {reason}; "
                              "keep the arrays on the CPU (the llvm backend) or run on a "
                              "machine with a GPU")


def _host(x: Any) -> np.ndarray:
    if isinstance(x, _DeviceLeaf):
        x = x.device_array
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)
    if callable(get):  # CuPy
        return np.asarray(get())
    return np.asarray(x)


# -- the frontend's side ------------------------------------------------------------------------
class _DeviceLeaf(np.ndarray):
    """A device array's stand-in inside argument structures: a host array of its dtype
    and shape that owns no memory (zero strides over one element), for signatures and
    structure walks, carrying the device array (``__cuda_array_interface__``)."""

    device_array: Any = None

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.device_array.__cuda_array_interface__


def _stand_in(x: Any) -> _DeviceLeaf:
    shape, dt = tuple(x.shape), np.dtype(x.dtype)
    base = np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape, (0,) * len(shape))
    leaf = base.view(_DeviceLeaf)
    leaf.device_array = x
    return leaf


def _argname(f: Any, i: int) -> str:
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                              params[i].POSITIONAL_OR_KEYWORD):
        return params[i].name
    return f"args[{i}]"


def prepare(f: Any, args: Sequence[Any], backend: str | None) -> tuple[tuple[Any, ...], str | None]:
    """The arguments as the frontend walks them, and the backend to use: with CuPy
    arrays among the leaves, device arrays become stand-ins and the backend is "cuda";
    host and device arrays mixed, or a host backend asked for device arrays, is an error
    naming the argument paths."""
    args = tuple(args)
    if "cupy" not in sys.modules:  # no CuPy imported: no device arrays (and no walk)
        return args, backend
    device, host = [], []
    for i, a in enumerate(args):
        for path, x in leaves(a):
            if is_device_array(x):
                device.append((i, path))
            elif isinstance(x, np.ndarray):
                host.append((i, path))
    if not device:
        return args, backend
    where = lambda ip: structs.format_path(ip[1], _argname(f, ip[0]))  # noqa: E731
    if host:
        raise YotaError(
            f"{where(host[0])} is a NumPy (host) array but {where(device[0])} is a CuPy "
            "(device) array: one call takes arrays of one kind; move them with "
            "yota.to_device(obj, 'cuda') or yota.to_device(obj, 'cpu')")
    if backend not in (None, "cuda"):
        raise YotaError(f"{where(device[0])} is a CuPy (device) array but backend="
                        f"{backend!r} runs on the host; use backend='cuda' or "
                        "yota.to_device(obj, 'cpu')")
    return tuple(rebuild(a, lambda p, x: _stand_in(x) if is_device_array(x) and not
                         isinstance(x, _DeviceLeaf) else x) for a in args), "cuda"


def for_backend(f: Any, args: Sequence[Any], backend: str | None) -> tuple[Any, ...]:
    """``prepare`` for a function already compiled for ``backend``: device arrays need
    "cuda" (host arrays are copied to the device by it)."""
    out, chosen = prepare(f, args, backend)
    if chosen == "cuda" and backend != "cuda":
        raise YotaError("this function was compiled for NumPy (host) arrays; call it with "
                        "NumPy arrays, or compile it with CuPy arrays (or backend='cuda')")
    return out


def host_values(args: Sequence[Any]) -> tuple[Any, ...]:
    """``args`` with device stand-ins replaced by host copies (for tracing on real
    values); the same objects when there are none."""
    return tuple(rebuild(a, lambda p, x: _host(x) if isinstance(x, _DeviceLeaf) else x)
                 for a in args)


def item(v: Any) -> Any:
    """A 0-d output (host or device) as a Python scalar."""
    return v.item() if hasattr(v, "item") else np.asarray(v).item()
