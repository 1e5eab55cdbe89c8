"""Where in the user's code: the innermost frame outside Yota and NumPy.

Tape entries record it as their provenance (``model.py:10``), and error messages quote
it with its source line, so every message points at the user's own code.
"""

from __future__ import annotations

import dis
import functools
import os
import re
import sys
from types import CodeType, FrameType
from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError

from .tape import Loc

_YOTA_DIR = os.path.dirname(os.path.abspath(__file__))
_IR_DIR = os.path.join(os.path.dirname(_YOTA_DIR), "ir")
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_SKIP: tuple[str, ...] = (_YOTA_DIR + os.sep, _NUMPY_DIR + os.sep, _IR_DIR + os.sep,
                          "<frozen ", "<__array")


# Asked once per traced op: which files are Yota's or NumPy's, and one Loc per place (the
# steps of a loop share them), both remembered (bounded)
_INTERNAL: dict[str, bool] = {}
_LOCS: dict[tuple[str, int, str], Loc] = {}
_LOCS_LIMIT = 1 << 16


def skip_files(directory: str) -> None:
    """Count the files under ``directory`` as library code, as Yota's and NumPy's (SciPy's,
    while Yota intercepts its functions: the user's line is the one that called SciPy)."""
    global _SKIP
    prefix = os.path.join(os.path.abspath(directory), "")
    if prefix not in _SKIP:
        _SKIP = (*_SKIP, prefix)
        _INTERNAL.clear()


def user_loc(depth: int = 1) -> Loc | None:
    """The innermost frame outside Yota and NumPy: the user's code."""
    f: FrameType | None = sys._getframe(depth)
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        internal = _INTERNAL.get(fn)
        if internal is None:
            if len(_INTERNAL) >= _LOCS_LIMIT:
                _INTERNAL.clear()
            internal = _INTERNAL[fn] = fn.startswith(_SKIP)
        if not internal:
            key = (fn, f.f_lineno, code.co_name)
            loc = _LOCS.get(key)
            if loc is None:
                if len(_LOCS) >= _LOCS_LIMIT:
                    _LOCS.clear()
                loc = _LOCS[key] = Loc(*key)
            return loc
        f = f.f_back
    return None


def where() -> str:
    """The user's ``file:line in func: source`` for error messages."""
    loc = user_loc(2)
    return loc.describe() if loc is not None else "an unknown place"


def user_frame() -> FrameType | None:
    """The innermost frame object outside Yota and NumPy (None if there is none)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_SKIP):
        f = f.f_back
    return f


def binding_name(arr: Any) -> tuple[dict[str, Any] | None, str]:
    """Where the user's frame binds the array: (globals dict or None, name).

    A global binding is re-checked on every call, so rebinding the name retraces."""
    f = user_frame()
    if f is not None:
        for k, v in f.f_locals.items():
            if v is arr:
                return None, k
        for k, v in f.f_globals.items():
            if v is arr:
                return f.f_globals, k
    return None, "unnamed array"


def forbid_math(conv: str) -> None:
    """Raise when the conversion comes from a ``math``/``cmath`` call on a traced value."""
    frame = user_frame()
    if frame is None:
        return
    loc = Loc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    for name in re.findall(r"([A-Za-z_][\w.]*)\s*\(", loc.source_line()):
        obj = _resolve(name, frame)
        if getattr(obj, "__module__", None) in ("math", "cmath") or (
                getattr(obj, "__self__", None) is sys.modules.get("math")):
            raise UnsupportedError(
                f"Python's {name}() is applied to a traced value at {loc.describe()}: "
                f"it would turn the value into a constant {conv}. Use the NumPy function "
                f"(np.{name.split('.')[-1]}) instead"
            )


def store_error(conv: str) -> UnsupportedError | None:
    """The error for NumPy converting a traced value to store it into a plain array
    (``y[i] = traced``: the user's frame is executing a subscript assignment), which would
    keep a constant and drop the gradient; None for any other conversion. (Raised from
    ``__float__`` it would be replaced by NumPy's own ValueError, so the tracer defers it.)"""
    frame = user_frame()
    if frame is None or _current_opname(frame) != "STORE_SUBSCR":
        return None
    loc = Loc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    return UnsupportedError(
        f"a traced value is stored into a plain NumPy array at {loc.describe()}: NumPy "
        f"would convert it to a Python {conv}, a constant cut off from the inputs (its "
        "gradient would be lost). Build the array from traced values instead (np.stack, "
        "np.concatenate, np.where, arithmetic)")


def _current_opname(frame: FrameType) -> str | None:
    return _opname_at(frame.f_code, frame.f_lasti)


@functools.lru_cache(maxsize=4096)
def _opname_at(code: CodeType, offset: int) -> str | None:
    """The instruction at ``offset`` of ``code`` (a loop converting a value on every
    iteration asks for the same one again: cached)."""
    for ins in dis.get_instructions(code):
        if ins.offset == offset:
            return ins.opname
    return None


def _resolve(dotted: str, frame: FrameType) -> Any:
    head, *rest = dotted.split(".")
    scope = {**frame.f_builtins, **frame.f_globals, **frame.f_locals}
    obj = scope.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj
