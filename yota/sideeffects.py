"""No tracer outlives a trace: what a traced function stored into objects it can reach is
put back as it was before the call.

User code often stores intermediate values on objects (``self.last = x @ self.W`` in a
layer, ``history.append(loss)``, ``global last``). During a trace those values are
tracers; left in place they would outlive the trace and break the next plain NumPy call.
Before tracing, the objects reachable from the function (a bound method's ``self``,
closure cells, the globals its code names, and what those hold: attributes, list and dict
items, the closures and globals of user functions they name) are snapshotted, shallowly.
After the trace, every attribute, dict item and global that now holds a tracer is put
back (or removed if it is new), and every list that gained one gets its old items back.
Other changes stay: like ``print``, they happened once, while tracing, and a compiled
replay does not repeat them. Arguments need none of this (the function runs on copies of
their containers); objects of installed libraries are not walked.

    >>> import numpy as np, yota
    >>> class Layer:
    ...     def __init__(self): self.W = np.ones((2, 2))
    ...     def loss(self, x):
    ...         self.last = x @ self.W
    ...         return np.sum(self.last)
    >>> layer = Layer()
    >>> _ = yota.grad(layer.loss, np.ones(2))
    >>> hasattr(layer, "last")
    False
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import yota.backends as _backends
import yota.ir as _ir

from .randomness import rng_types
from .tracer import Tracer

MAX_OBJECTS = 20_000  # objects snapshotted per trace, at most
MAX_ITEMS = 1_000  # items of one list or dict walked into, at most
MAX_COPY = 100_000  # longer lists and dicts are taken for data, not snapshotted

_MISSING = object()
# code in these folders is library code: its objects and functions are not walked into
_LIBRARY = tuple(os.path.join(os.path.abspath(p), "") for p in {
    os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(_ir.__file__)),
    os.path.dirname(os.path.abspath(_backends.__file__)),
    os.path.dirname(os.path.abspath(np.__file__)),
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"]})
_ATOMIC = (np.ndarray, np.generic, int, float, complex, str, bytes, bool, type(None), type,
           types.ModuleType, types.BuiltinFunctionType, types.BuiltinMethodType, range,
           slice, np.ufunc, np.dtype)


class Snapshot:
    """The shallow state of every object reachable from a function, to restore later."""

    def __init__(self) -> None:
        self.dicts: list[tuple[dict[Any, Any], dict[Any, Any]]] = []
        self.lists: list[tuple[list[Any], list[Any]]] = []
        self.bindings: list[tuple[dict[str, Any], str, Any]] = []  # globals the code names
        # where a random generator is held: (dict or list, key) or (closure cell, None)
        self.rng_slots: list[tuple[Any, Any]] = []
        self.unrecordable: list[Any] = []  # generators seen where they cannot be swapped
        self._seen: set[int] = set()

    @classmethod
    def of(cls, f: Callable[..., Any], args: list[Any] | None = None) -> Snapshot:
        """The snapshot of what ``f`` reaches; ``args``: the (copied) arguments it will be
        called with, walked for random generators only."""
        snap = cls()
        snap._walk(list(snap._roots(f)))
        if args is not None:
            snap._find_rngs(args)
        return snap

    def _find_rngs(self, args: list[Any]) -> None:
        todo: list[Any] = [args]
        seen: set[int] = set()
        while todo:
            x = todo.pop()
            if id(x) in seen or isinstance(x, _ATOMIC):
                continue
            seen.add(id(x))
            items = _items(x)
            for holder, key, v in items:
                if isinstance(v, rng_types()):
                    if holder is not None:  # in a tuple: checked, not recorded
                        self.rng_slots.append((holder, key))
                    else:
                        self.unrecordable.append(v)
                else:
                    todo.append(v)

    def _walk(self, todo: list[Any]) -> None:
        while todo and len(self._seen) < MAX_OBJECTS:
            x = todo.pop()
            if isinstance(x, _ATOMIC) or id(x) in self._seen:
                continue
            self._seen.add(id(x))
            todo.extend(self._record(x))

    def _record(self, x: Any) -> list[Any]:
        """Snapshot ``x`` and return what it holds."""
        if isinstance(x, (types.FunctionType, types.MethodType)):
            return list(self._roots(x)) if _user_code(x) else []
        if isinstance(x, list):
            if len(x) > MAX_COPY:  # a data set, not state: not copied (nor restored)
                return []
            self.lists.append((x, list(x)))
            self._rngs_in(x, enumerate(x))
            return x[:MAX_ITEMS]
        if isinstance(x, dict):
            if len(x) > MAX_COPY:
                return []
            self.dicts.append((x, dict(x)))
            self._rngs_in(x, x.items())
            return list(x.values())[:MAX_ITEMS]
        if isinstance(x, tuple):
            return list(x[:MAX_ITEMS])
        d = getattr(x, "__dict__", None)
        if isinstance(d, dict) and _user_object(x):
            self.dicts.append((d, dict(d)))
            self._rngs_in(d, d.items())
            return list(d.values())[:MAX_ITEMS]
        return []

    def _rngs_in(self, holder: Any, items: Any) -> None:
        self.rng_slots += [(holder, k) for k, v in items if isinstance(v, rng_types())]

    def restore(self) -> None:
        """Put back every attribute, dict item, global binding and list that now holds a
        tracer; other changes stay (they happened once, while tracing)."""
        for d, old in self.dicts:
            for k in [k for k, v in d.items() if v is not old.get(k, _MISSING)
                      and _has_tracer(v)]:
                _put_back(d, k, old.get(k, _MISSING))
        for lst, items in self.lists:
            if any(_has_tracer(v) for v in lst if not any(v is w for w in items)):
                lst[:] = items
        for g, name, old in self.bindings:
            now = g.get(name, _MISSING)
            if now is not old and _has_tracer(now):
                _put_back(g, name, old)

    def _roots(self, f: Any) -> Iterator[Any]:
        """What a function can reach directly: its ``self``, closure cells, and the globals
        its code (and the code nested in it) names, whose bindings are recorded too."""
        if isinstance(f, types.MethodType):
            yield f.__self__
            f = f.__func__
        elif not isinstance(f, types.FunctionType):  # a callable object
            yield f
            f = vars(type(f)).get("__call__")  # a __call__ defined by the class itself
            if not isinstance(f, types.FunctionType):
                return
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, rng_types()):
                self.rng_slots.append((cell, None))
            yield value
        g = f.__globals__
        for name in set(_names(f.__code__)):
            value = g.get(name, _MISSING)
            self.bindings.append((g, name, value))
            if isinstance(value, rng_types()):
                self.rng_slots.append((g, name))
            if value is not _MISSING:
                yield value


def _user_code(f: Any) -> bool:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return code is not None and _user_file(code.co_filename)


def _user_file(path: str) -> bool:
    """Not a file of Yota, NumPy or the Python installation (``<string>``: user code)."""
    return path.startswith("<") or not os.path.abspath(path).startswith(_LIBRARY)


def _user_object(x: Any) -> bool:
    """An instance of a class defined outside the libraries: where the class's own
    methods were compiled, else its module's file (none: ``__main__``, a notebook)."""
    for v in vars(type(x)).values():
        if isinstance(v, types.FunctionType):
            return _user_code(v)
    mod = sys.modules.get(type(x).__module__)
    path = getattr(mod, "__file__", None)
    return path is None or _user_file(path)


def _items(x: Any) -> list[tuple[Any, Any, Any]]:
    """(holder, key, value) for the items of a list, dict or object that can be replaced."""
    if isinstance(x, list):
        return [(x, i, v) for i, v in enumerate(x[:MAX_ITEMS])]
    if isinstance(x, dict):
        return [(x, k, v) for k, v in list(x.items())[:MAX_ITEMS]]
    if isinstance(x, tuple):
        return [(None, None, v) for v in x[:MAX_ITEMS]]
    d = getattr(x, "__dict__", None)
    return [(d, k, v) for k, v in d.items()] if isinstance(d, dict) else []


def _put_back(d: dict[Any, Any], key: Any, old: Any) -> None:
    if old is _MISSING:
        del d[key]
    else:
        d[key] = old


def _has_tracer(v: Any, depth: int = 3) -> bool:
    if isinstance(v, Tracer):
        return True
    if depth == 0:
        return False
    if isinstance(v, (list, tuple)):
        return any(_has_tracer(x, depth - 1) for x in v[:MAX_ITEMS])
    if isinstance(v, dict):
        return any(_has_tracer(x, depth - 1) for x in list(v.values())[:MAX_ITEMS])
    return False


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _names(c)
