"""The registry of the NumPy → IR table: one ``NumpyOp`` per supported NumPy function.

Each family module (``ufuncs``, ``reductions``, ``shape``...) registers its entries with
``@register(name, forward, *numpy_funcs)``: ``name`` is shown on the tape, ``forward``
computes the example value while tracing, and the decorated function is the lowering
``lower(L, outs, *args, **kwargs)`` that emits IR ops for one call (``L`` is a
``LoweringContext``, ``outs`` the result types NumPy produced).

The tracer asks this module which entry a NumPy call or ufunc means (``lookup``,
``resolve_ufunc``, ``resolve_function``); the lowering reads ``TABLE``. Nothing here
knows about tracers.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from ..userloc import where

Lower = Callable[..., Any]


class LoweringContext(Protocol):
    """What a lowering sees (``yota.lowering.Lowering`` implements it): the IR builder and
    the tape's arguments as IR values."""

    b: Builder

    def operand(self, a: Any, dtype: Any, shape: tuple[int, ...] | None) -> Value:
        """Argument ``a`` (a tape variable, or a Python scalar or list made a constant) as
        an IR value, converted to ``dtype`` and broadcast to ``shape`` when given."""
        ...

    def promote(self, *args: Any) -> np.dtype:
        """The dtype NumPy promotes ``args`` to (NEP 50: Python scalars are weak)."""
        ...

    def is_traced(self, a: Any) -> bool:
        """Whether argument ``a`` is a traced value (not a static Python value)."""
        ...

    def type_of(self, a: Any) -> TensorType | None:
        """The array type of argument ``a``, or None when it is not an array."""
        ...


@dataclass(frozen=True)
class NumpyOp:
    """One supported NumPy-level operation."""

    name: str
    forward: Callable[..., Any]
    lower: Lower

    @cached_property
    def signature(self) -> inspect.Signature:
        """The accepted arguments: the lowering's, less ``(L, outs)`` (computed on the
        entry's first use: ``inspect.signature`` of all ~230 lowerings cost ``import
        yota`` ~5 ms)."""
        sig = inspect.signature(self.lower)
        return sig.replace(parameters=list(sig.parameters.values())[2:])

    @cached_property
    def accepted(self) -> set[Any]:
        """The call shapes ``signature`` binds: the number of positional arguments, with
        the keyword names when there are some. Binding depends on nothing else (not on
        the values), so each shape is checked once (``lookup``)."""
        return set()


# Families imported on first need (``yota.numpy`` imports the others): the first lookup of
# a name or NumPy function not registered yet imports them all, then looks again. They
# cost ``import yota`` ~5 ms and most programs use none of them. No entry or NumPy
# function is registered twice, so the order families load in does not matter.
LAZY_FAMILIES = ("mathfuncs", "scans", "sorting", "statistics", "einsum", "linalg",
                 "joining", "movement", "padding", "convolve", "special", "special_funcs")
_families_loaded = False


def load_families() -> None:
    """Import every family module of ``LAZY_FAMILIES`` (once; later calls return)."""
    global _families_loaded
    if _families_loaded:
        return
    import importlib

    for name in LAZY_FAMILIES:
        importlib.import_module(f"{__package__}.{name}")
    _families_loaded = True


class _Registry(dict):
    """A dict that imports the lazy families before it answers that a key is missing."""

    def __missing__(self, key: Any) -> Any:
        if _families_loaded:
            raise KeyError(key)
        load_families()
        return self[key]

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key) or _families_loaded:
            return dict.__contains__(self, key)
        load_families()
        return dict.__contains__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, _ABSENT)
        if value is not _ABSENT:
            return value
        return self[key] if key in self else default


_ABSENT = object()


TABLE: dict[str, NumpyOp] = _Registry()
BY_FUNC: dict[Any, str] = _Registry()  # NumPy callable (function or ufunc) → its TABLE name
# NumPy functions that ask about a traced array's shape (np.shape, np.ndim, np.size): the
# tracer answers them from the example value, as Python values, without recording
QUERIES: dict[Any, Callable[..., Any]] = {}
# NumPy functions Yota writes as NumPy calls on the traced values (``compose``): the
# tracer runs the composition instead of recording one entry
class _Compositions(dict):
    """``get`` imports the lazy families only for a function the table does not know yet
    (``np.pad`` before ``movement`` and ``padding`` are loaded), never for a core one."""

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, _ABSENT)
        if value is not _ABSENT:
            return value
        if not _families_loaded and not dict.__contains__(BY_FUNC, key):
            load_families()
            return dict.get(self, key, default)
        return default


COMPOSED: dict[Any, Callable[..., Any]] = _Compositions()


def compose(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function, written with NumPy calls, as what NumPy ``funcs``
    do on traced values (same arguments). It may return ``NotImplemented`` for the calls
    the function's entry of the table lowers."""
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for f in funcs:
            COMPOSED[f] = fn
        return fn
    return deco


def register(name: str, forward: Callable[..., Any], *funcs: Any) -> Callable[[Lower], Lower]:
    """Register ``lower(L, outs, *args, **kwargs)`` for NumPy ``funcs`` as tape name ``name``."""

    def deco(lower: Lower) -> Lower:
        TABLE[name] = NumpyOp(name, forward, lower)
        for f in funcs:
            BY_FUNC[f] = name
        return lower

    return deco


_REFUSED_KWARGS = {
    "out": "it would mutate an array; use the returned value",
    "where": "masked reductions are not supported; use np.where(mask, x, 0) first",
    "initial": "initial values are not supported; combine with the result instead",
    "casting": "only NumPy's default casting is supported",
    "order": "only C (row-major) order is supported",
    "subok": "subclasses are not traced",
    "signature": "ufunc loop signatures are not supported",
}


_ACCEPT_WHERE = {"where", "sum", "mean"}  # np.where itself; masked sums and means


def lookup(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NumpyOp:
    """The entry ``name``, after checking that it accepts ``args`` and ``kwargs``."""
    entry = TABLE[name]
    shape = (len(args), tuple(kwargs)) if kwargs else len(args)
    if shape not in entry.accepted:
        try:
            entry.signature.bind(*args, **kwargs)
        except TypeError as e:
            shown = name if "." in name else f"np.{name}"
            raise UnsupportedError(f"{shown} at {where()}: {e} (Yota supports "
                                   f"{shown}{entry.signature})") from None
        entry.accepted.add(shape)
    if kwargs:
        _refuse_kwargs(name, kwargs)
    return entry


def _refuse_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    for k, why in _REFUSED_KWARGS.items():
        v = kwargs.get(k)
        if v is not None and not (k == "where" and name in _ACCEPT_WHERE) and not (
                k == "order" and v == "C") and not (k == "casting" and v == "same_kind"):
            shown = repr(v) if isinstance(v, (str, int, float)) else "..."
            raise UnsupportedError(f"np.{name}(..., {k}={shown}) at {where()} is not "
                                   f"supported by Yota's tracer: {why}")


_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


def resolve_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The entry a ufunc call means (``np.add.reduce`` is ``sum``), with its arguments."""
    if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCE:
        if len(inputs) == 1:
            kwargs = {"axis": 0, **kwargs}  # ufunc.reduce reduces axis 0 by default
        return _UFUNC_REDUCE[ufunc.__name__], inputs, kwargs
    if method != "__call__":
        raise UnsupportedError(f"np.{ufunc.__name__}.{method} at {where()} is not "
                               "supported on traced arrays")
    name = BY_FUNC.get(ufunc)
    if name is None:
        name = _scipy_ufunc(ufunc)
    return name, inputs, kwargs


def _scipy_ufunc(ufunc: np.ufunc) -> str:
    """The entry of a ufunc of ``scipy.special`` (``scipy.special.<name>``, found by name:
    nothing imports SciPy unless the user's code did), remembered in ``BY_FUNC``."""
    special = sys.modules.get("scipy.special")
    if special is None or getattr(special, ufunc.__name__, None) is not ufunc:
        raise _unsupported(f"np.{ufunc.__name__}")
    name = f"scipy.special.{ufunc.__name__}"
    if name not in TABLE:
        raise _unsupported(name)
    BY_FUNC[ufunc] = name
    return name


def resolve_function(func: Callable[..., Any]) -> str:
    """The entry a NumPy function (met through ``__array_function__``) means."""
    name = BY_FUNC.get(func)
    if name is None:
        raise _unsupported(public_name(func))
    return name


def public_name(func: Callable[..., Any]) -> str:
    """How users spell a NumPy function: ``np.sort``, ``np.linalg.inv``, ``np.fft.fft``."""
    fname = getattr(func, "__name__", repr(func))
    for sub in ("", "linalg", "fft", "random", "lib"):
        mod = getattr(np, sub, None) if sub else np
        if getattr(mod, fname, None) is func:
            return f"np.{sub}.{fname}" if sub else f"np.{fname}"
    return f"{getattr(func, '__module__', None) or 'numpy'}.{fname}"


def _unsupported(what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{what} is not supported on traced arrays (at {where()}). Write it with supported "
        f"NumPy functions, or call it from a function decorated @yota.primitive(opaque=True) "
        f"(run on plain arrays when the program runs) and give that a @yota.diffrule"
    )
