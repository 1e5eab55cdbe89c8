"""Building arrays from traced values: ``np.array``/``np.asarray`` of (nested) lists and
tuples mixing traced and plain values, ``np.r_``/``np.c_``, and the shape queries
``np.shape``/``np.ndim``/``np.size``.

``np.array`` and its relatives are not dispatched through ``__array_function__``, so while
a trace runs ``constructors`` puts thin wrappers in their place in the ``numpy`` module:
a call that holds no traced value goes to NumPy unchanged; one that does becomes the
tape entry ``array`` (a nested list of traced values lowers to reshapes and one
``concatenate``), and ``np.asarray(traced)`` is the traced value itself.

The shape queries answer with Python ints from the example value (shapes are static), as
``x.shape`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from ..patching import NumpyPatch
from ..userloc import where
from . import scipy_api
from .registry import QUERIES, LoweringContext, register

QUERIES.update({np.shape: np.shape, np.ndim: np.ndim, np.size: np.size})


def _array_forward(object: Any, dtype: Any = None, *, copy: Any = True, order: Any = None,
                   subok: bool = False, ndmin: int = 0) -> np.ndarray:
    return np.array(object, dtype=dtype, ndmin=ndmin)


@register("array", _array_forward)
def _array(L: LoweringContext, outs: list[TensorType], object: Any, dtype: Any = None, *,
           copy: Any = True, order: Any = None, subok: bool = False, ndmin: int = 0) -> Value:
    o = outs[0]
    return L.b.reshape_to(L.operand(object, o.dtype, None), o.shape)


# -- the wrappers in place of np.array & co. while a trace runs -----------------------------------
class _Hooks:
    """What the wrappers need from the tracer (given by ``constructors``, so that this
    package does not import the tracer)."""

    def __init__(self, is_traced: Callable[[Any], bool], call: Callable[..., Any]) -> None:
        self.is_traced = is_traced
        self.call = call

    def holds(self, obj: Any) -> bool:
        if self.is_traced(obj):
            return True
        return isinstance(obj, (list, tuple)) and any(self.holds(v) for v in obj)


_PATCH = NumpyPatch(("array", "asarray", "asanyarray", "ascontiguousarray", "r_", "c_"))
_ORIGINAL = _PATCH.original


def _hooks() -> _Hooks | None:
    """This thread's hooks while it traces (other threads' calls go to NumPy at once)."""
    hooks: _Hooks | None = _PATCH.top()
    return hooks


def _refuse(kw: dict[str, Any], fname: str) -> None:
    for k in ("like", "device"):
        if kw.get(k) is not None:
            raise UnsupportedError(f"np.{fname}(..., {k}=...) of a traced value at {where()} "
                                   "is not supported")


def _wrap_array(fname: str, copies: bool, min_ndim: int = 0) -> Callable[..., Any]:
    """``np.<fname>`` accepting traced values (``copies``: it copies by default;
    ``min_ndim``: its results have at least that many axes)."""
    original = _ORIGINAL[fname]

    def wrapper(obj: Any, *args: Any, **kw: Any) -> Any:
        h = _hooks()
        if h is None or not h.holds(obj):
            return original(obj, *args, **kw)
        _refuse(kw, fname)
        dtype = args[0] if args else kw.get("dtype")
        ndmin = max(kw.get("ndmin", 0), min_ndim)
        if h.is_traced(obj) and ndmin <= obj.ndim and not obj.weak:  # weak: a Python float
            if dtype is not None and np.dtype(dtype) != obj.dtype:
                return h.call("astype", obj, dtype)
            copy = _copy_flag(kw.get("copy", True if copies else None))
            return h.call("copy", obj) if copy else obj
        return h.call("array", obj, dtype, ndmin=ndmin)

    wrapper.__name__ = wrapper.__qualname__ = fname
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _copy_flag(copy: Any) -> bool | None:
    """``copy=`` as True, False or None (NumPy's ``np._CopyMode``, which SciPy's
    ``asarray`` passes, too: its truth value is an error)."""
    mode = getattr(np, "_CopyMode", None)
    if mode is not None and isinstance(copy, mode):
        return {mode.ALWAYS: True, mode.NEVER: False}.get(copy)
    return None if copy is None else bool(copy)


class _Concatenator:
    """``np.r_`` / ``np.c_`` on items that may be traced (others go to NumPy's)."""

    def __init__(self, original: Any, axis: int, ndmin: int, trans1d: int) -> None:
        self.original = original
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __getitem__(self, key: Any) -> Any:
        h = _hooks()
        items = key if isinstance(key, tuple) else (key,)
        if h is None or not any(h.holds(v) for v in items):
            return self.original[key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if isinstance(items[0], str):
            axis, ndmin, trans1d = _directive(items[0], axis, ndmin, trans1d)
            items = items[1:]
        objs = [self._piece(v, ndmin, trans1d) for v in items]
        # Python scalars (traced Python floats too) are weak: they take the arrays' dtype
        scalars = [i for i, v in enumerate(items) if type(v) in (int, float, bool)
                   or getattr(v, "weak", False)]
        if scalars:
            dt = np.result_type(*[o.dtype for i, o in enumerate(objs) if i not in scalars],
                                *[getattr(items[i], "value", items[i]) for i in scalars])
            for i in scalars:
                objs[i] = np.array(items[i], dtype=dt, ndmin=max(ndmin, 1))
        return np.concatenate(objs, axis=axis)

    def _piece(self, item: Any, ndmin: int, trans1d: int) -> Any:
        if isinstance(item, str):
            raise UnsupportedError(f"np.r_/np.c_ at {where()}: a directive string must be "
                                   "the first item")
        if isinstance(item, slice):
            return self.original[f"0,{max(ndmin, 1)},{trans1d}", item]
        x = np.asarray(item)  # the wrapper: a traced value stays traced
        nd = x.ndim
        if nd < ndmin:
            x = np.array(x, ndmin=ndmin)
        if trans1d != -1 and nd < ndmin:
            k2, k1 = ndmin - nd, trans1d if trans1d >= 0 else trans1d + ndmin - nd + 1
            order = list(range(ndmin))
            x = np.transpose(x, order[:k1] + order[k2:] + order[k1:k2])
        return x


def _directive(s: str, axis: int, ndmin: int, trans1d: int) -> tuple[int, int, int]:
    if s in ("r", "c"):
        raise UnsupportedError(f"np.r_['{s}', ...] at {where()} builds a np.matrix, which "
                               "Yota does not trace; use np.stack or np.concatenate")
    try:
        parts = [int(p) for p in s.split(",")]
    except ValueError:
        raise UnsupportedError(f"np.r_/np.c_ at {where()}: unknown directive {s!r}") from None
    parts += [ndmin, trans1d][len(parts) - 1:]
    return parts[0], parts[1], parts[2]


_PATCH.wrap({
    "array": _wrap_array("array", True),
    "asarray": _wrap_array("asarray", False),
    "asanyarray": _wrap_array("asanyarray", False),
    "ascontiguousarray": _wrap_array("ascontiguousarray", False, min_ndim=1),
    "r_": _Concatenator(_ORIGINAL["r_"], 0, 1, -1),
    "c_": _Concatenator(_ORIGINAL["c_"], -1, 2, 0),
})


@contextlib.contextmanager
def constructors(is_traced: Callable[[Any], bool], call: Callable[..., Any]) -> Iterator[None]:
    """While the block runs, ``np.array``, ``np.asarray``, ``np.asanyarray``,
    ``np.ascontiguousarray``, ``np.r_`` and ``np.c_`` accept traced values: ``call(name,
    *args, **kwargs)`` records a table entry; ``is_traced`` tells traced values apart.

    >>> import numpy as np
    >>> with constructors(lambda x: False, None):
    ...     np.array([1.0, 2.0]).tolist()
    [1.0, 2.0]
    """
    with _PATCH.active(_Hooks(is_traced, call)), scipy_api.active(is_traced):
        yield
