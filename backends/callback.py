"""The host side of ``callback`` ops (``yota.ir.ops.callback``) in compiled code: native
code calls ``entry`` (through a C function pointer the loader binds by name, so no
address is part of any cached object) with a description of the call and one pointer per
operand and result; ``entry`` makes NumPy views of the operands, calls the function
(``invoke``), and writes the results through the result pointers.

``entry`` is called from the thread that runs the program: through ctypes (the GIL was
released around the program: the callback's ctypes wrapper takes it again) or from the
native Python entry (the thread holds the GIL: taking it again is a no-op). It never lets
an exception out into native code: it keeps the exception under a number and returns that
number, the program stops with its ``"callback"`` failure record, and ``raise_failure``
raises the kept exception (a ``CallbackError`` naming the primitive and the user's line).

The description is a JSON text in the object code: ``{"fn", "static", "ins": [[dtype,
shape, byte strides]...], "outs": [...]}``.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import threading
from functools import lru_cache
from typing import Any

import numpy as np
from yota.ir.errors import YotaError
from yota.ir.ops.callback import CallbackError, invoke, name_of
from yota.ir.types import TensorType

SYMBOL = "yota_callback"
PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)

_errors: dict[int, BaseException] = {}
_lock = threading.Lock()
_ids = itertools.count(1)


def describe(fn: str, static: str, ins: list[tuple[np.dtype, tuple[int, ...], tuple[int, ...]]],
             outs: list[tuple[np.dtype, tuple[int, ...], tuple[int, ...]]]) -> bytes:
    """The description of one call (``ins``/``outs``: dtype, shape, strides in bytes), as
    the NUL-terminated bytes generated code passes."""
    def arr(d: Any) -> list[Any]:
        return [np.dtype(d[0]).name, list(d[1]), list(d[2])]
    return json.dumps({"fn": fn, "static": static, "ins": [arr(d) for d in ins],
                       "outs": [arr(d) for d in outs]}, separators=(",", ":")).encode() + b"\0"


@lru_cache(maxsize=1024)
def _parsed(desc: bytes) -> dict[str, Any]:
    d = json.loads(desc)
    d["types"] = [TensorType(np.dtype(t), tuple(s)) for t, s, _ in d["outs"]]
    return dict(d)


def _view(addr: int, dtype: str, shape: list[int], strides: list[int]) -> np.ndarray:
    """The array of ``shape`` and byte ``strides`` whose first element is at ``addr``."""
    dt = np.dtype(dtype)
    if not all(shape) or not addr:
        return np.zeros(shape, dt)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True)) + dt.itemsize
    buf = (ctypes.c_char * (hi - lo)).from_address(addr + lo)
    return np.ndarray(tuple(shape), dt, buffer=memoryview(buf).cast("B"), offset=-lo,
                      strides=tuple(strides))


def run(desc: bytes, ptrs: list[int]) -> None:
    """One call: operands at ``ptrs[:n_in]``, results written to the rest."""
    d = _parsed(desc)
    n = len(d["ins"])
    args = [_view(p, *spec) for p, spec in zip(ptrs[:n], d["ins"], strict=True)]
    got = invoke(d["fn"], d["static"], args, d["types"])
    for p, spec, r in zip(ptrs[n:], d["outs"], got, strict=True):
        if r.size:
            np.copyto(_view(p, *spec), r)


def _entry(desc: int, ptrs: int) -> int:
    try:
        raw = ctypes.string_at(desc)
        d = _parsed(raw)
        count = len(d["ins"]) + len(d["outs"])
        addrs = list((ctypes.c_void_p * count).from_address(ptrs)) if count else []
        run(raw, [a or 0 for a in addrs])
        return 0
    except BaseException as e:  # never into native code: kept, raised by raise_failure
        with _lock:
            k = next(_ids)
            _errors[k] = e
        return k


ENTRY = PROTO(_entry)  # kept alive for the process: generated code calls it
ADDRESS: int = ctypes.cast(ENTRY, ctypes.c_void_p).value or 0


def failure(rec: dict[str, Any], k: int) -> YotaError:
    """The error of a callback that failed with kept exception number ``k``."""
    with _lock:
        e = _errors.pop(int(k), None)
    where = f" (at {rec['loc']})" if rec.get("loc") else ""
    if isinstance(e, CallbackError):
        err = CallbackError(f"{e}{where}")
    else:
        err = CallbackError(f"the opaque primitive {name_of(rec.get('fn', '?'))} failed"
                            f"{where}: {type(e).__name__}: {e}")
    err.__cause__ = e.__cause__ if isinstance(e, CallbackError) and e.__cause__ else e
    return err
