"""NumPy functions and ufuncs given (nested) lists holding traced values:
``np.mean([a, b])``, ``np.linalg.norm([x, y])``, ``np.exp([a, b])``, ``np.take(G, idx)``.

NumPy asks a traced value to take part (``__array_function__``, ``__array_ufunc__``) only
when it is an argument itself, not an item of a list: ``np.mean([a, b])`` converts the
list with ``asarray``, which a traced value cannot answer. Neither does an argument that
NumPy's dispatcher does not look at (``np.take(G, idx)``: only ``G`` is).

- Functions: the Python implementation of each function of the table
  (the one NumPy's dispatcher calls when no argument took part) is answered by
  ``yota.foreign``'s hooks. When one of its array arguments (``a``, ``x``, ``values``,
  ``weights``... : ``ARRAYS``; the items of ``arrays``, ``tup``...: ``SEQUENCES``) holds a
  traced value, the lists among them become arrays as NumPy converts them (``np.array``:
  traced) and the call records the function's entry; otherwise NumPy's own code runs
  (a traced shape or axis answers ``__index__`` there, as before).
- Ufuncs: ``np.<ufunc>`` (the ufuncs of the table) is a thin
  stand-in (``UfuncCall``) that converts list arguments holding traced values with
  ``np.array`` and calls the ufunc; its attributes (``.at``, ``.reduce``, ``.nin``...) are
  the ufunc's. ``from numpy import exp`` binds the ufunc itself, which refuses lists of
  traced values with a clear error, as before.

Both answer only in the traces that need them (installing the hooks costs a trace's start
~0.2 ms): a trace that meets a traced value NumPy converts is run again with them
(``yota.tracing``), and so are the function's later traces.

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda a, b: np.mean([a, 2 * b]), 1.0, 3.0)
    >>> [float(v) for v in g]
    [0.5, 1.0]
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..patching import NumpyPatch
from . import registry
from .hooks import TraceAPI, Version, hook

# parameters of NumPy's implementations that hold one array(-like)
ARRAYS = frozenset("""a A a_min a_max min max append prepend arr array ary b condition f
    fill_value indices m obj q to_begin to_end v val values weights where x x1 x2 z
    default""".split())
# parameters that hold a sequence of array-likes (each item converted on its own)
SEQUENCES = frozenset("arrays tup args arys xi operands choices condlist choicelist "
                      "varargs".split())


def _holds(x: Any, is_traced: Callable[[Any], bool]) -> bool:
    if is_traced(x):
        return True
    return isinstance(x, (list, tuple)) and any(_holds(v, is_traced) for v in x)


def _version(entry: str, func: Any, impl: types.FunctionType) -> Version:
    """Yota's answer to ``impl`` (a NumPy implementation) reached with traced values."""
    sig = inspect.signature(impl)
    kinds = {p.name: p.kind for p in sig.parameters.values()}

    def version(api: TraceAPI, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return NotImplemented  # NumPy's own code says what is wrong
        found, traced = False, api.is_traced
        for name, value in bound.arguments.items():
            if name in ARRAYS and _holds(value, traced):
                found = True
                if isinstance(value, (list, tuple)):
                    bound.arguments[name] = api.call("array", value)
            elif name in SEQUENCES and isinstance(value, (list, tuple)) and \
                    _holds(value, traced):
                found = True
                items = [api.call("array", v) if isinstance(v, (list, tuple)) and
                         _holds(v, traced) else v for v in value]
                bound.arguments[name] = tuple(items) if kinds[name] is \
                    inspect.Parameter.VAR_POSITIONAL or isinstance(value, tuple) else items
        if not found:
            return NotImplemented  # traced shapes or axes: NumPy's code asks __index__
        composed = registry.COMPOSED.get(func)
        if composed is not None:
            out = composed(*bound.args, **bound.kwargs)
            if out is not NotImplemented:
                return out
        return api.call(entry, *bound.args, **bound.kwargs)

    version.__name__ = impl.__name__
    return version


def _register() -> None:
    """A hook for each function of the table that NumPy implements in Python."""
    registry.load_families()
    for func, entry in list(registry.BY_FUNC.items()):
        impl = getattr(func, "_implementation", None)
        module, name = getattr(func, "__module__", None), getattr(func, "__name__", "")
        lib = sys.modules.get(module) if module else None
        if isinstance(impl, types.FunctionType) and getattr(lib, name, None) is func:
            hook(str(module), name)(_version(entry, func, impl))


_register()


# -- ufuncs ------------------------------------------------------------------------------------
class UfuncCall:
    """``np.<ufunc>`` while a trace runs: list arguments holding traced values become
    arrays (``np.array``, traced) before the ufunc is called; everything else is the
    ufunc's."""

    __slots__ = ("ufunc",)

    def __init__(self, ufunc: np.ufunc) -> None:
        self.ufunc = ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hooks = _PATCH.top()
        if hooks is not None and any(isinstance(a, (list, tuple)) and hooks.holds(a)
                                     for a in args):
            args = tuple(np.array(a) if isinstance(a, (list, tuple)) and hooks.holds(a)
                         else a for a in args)
        return self.ufunc(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ufunc, name)

    def __repr__(self) -> str:
        return repr(self.ufunc)


def _ufunc_names() -> list[str]:
    return sorted(name for name, v in vars(np).items() if isinstance(v, np.ufunc)
                  and v in registry.BY_FUNC)


_PATCH = NumpyPatch(_ufunc_names())
_PATCH.wrap({name: UfuncCall(u) for name, u in _PATCH.original.items()})


@contextlib.contextmanager
def ufuncs(hooks: Any) -> Iterator[None]:
    """While the block runs, ``np.<ufunc>`` accepts lists holding traced values (``hooks``:
    the tracer's ``holds``)."""
    with _PATCH.active(hooks):
        yield
