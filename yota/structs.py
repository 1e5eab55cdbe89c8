"""Walks argument structures: array leaves with field paths, static values, rebuilding.

A structure is an array, a Python float (a differentiable 0-d leaf), a static value
(int, bool, str, None, any other hashable object), or a container of those: dataclasses,
objects with ``__dict__`` or ``__slots__``, NamedTuples, tuples, lists and dicts.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import TraceError
from yota.ir.types import DTYPE_NAMES

Path = tuple[Any, ...]
_SCALARS = (int, bool, str, bytes, type(None), complex)
_OPAQUE = (type, np.dtype, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.ModuleType, np.ufunc, functools.partial, range, slice)


_traced: tuple[type, ...] = ()  # the tracer class (yota.tracing): never walked into
_static: tuple[type, ...] = ()  # boxes that are static values by identity (autograd.Param)
_stop: tuple[type, ...] = _SCALARS + _OPAQUE  # what children() does not walk into


def register(*, traced: type | None = None, static: type | None = None) -> None:
    """Declare a tracer class (``yota.tracing``) or a box that is a static value by its
    identity in an argument (``yota.autograd.Param``): neither is walked into."""
    global _traced, _stop, _static
    if traced is not None:
        _traced += (traced,)
    if static is not None:
        _static += (static,)
    _stop += tuple(t for t in (traced, static) if t is not None)


def is_traced(x: Any) -> bool:
    """True for a tracer (a value of a running trace)."""
    return isinstance(x, _traced)


def is_static_box(x: Any) -> bool:
    """True for a box registered as a static value by its identity (``Param``)."""
    return isinstance(x, _static)


def is_leaf(x: Any) -> bool:
    """Dynamic leaves: arrays, NumPy scalars and Python floats."""
    return isinstance(x, (np.ndarray, np.generic)) or type(x) is float


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def children(x: Any) -> list[tuple[Any, Any]] | None:
    """(key, child) pairs of a container, or None for a leaf or static value."""
    if is_leaf(x) or isinstance(x, _stop):
        return None
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f.name, getattr(x, f.name)) for f in dataclasses.fields(x)]
    if _is_namedtuple(x):
        return list(zip(type(x)._fields, x, strict=True))
    if isinstance(x, (tuple, list)):
        return list(enumerate(x))
    if isinstance(x, dict):
        return list(x.items())
    if isinstance(x, type):
        return None
    slots = _slot_names(type(x))
    if hasattr(x, "__dict__") or slots:
        attrs = vars(x) if hasattr(x, "__dict__") else {}
        return [(k, getattr(x, k)) for k in slots if hasattr(x, k)] + list(attrs.items())
    return None


def _slot_names(cls: type) -> list[str]:
    """The ``__slots__`` attributes of ``cls`` and its bases (objects without a __dict__)."""
    names: list[str] = []
    for c in reversed(cls.__mro__):
        slots = c.__dict__.get("__slots__", ())
        names += [n for n in ((slots,) if isinstance(slots, str) else slots)
                  if n not in ("__dict__", "__weakref__") and n not in names]
    return names


def is_attr_container(x: Any) -> bool:
    """True when children are reached with getattr (dataclass, object, NamedTuple)."""
    return (dataclasses.is_dataclass(x) or _is_namedtuple(x)
            or not isinstance(x, (tuple, list, dict)))


def flatten(x: Any, path: Path = ()) -> tuple[list[tuple[Path, Any]], Any]:
    """Dynamic leaves (path, value) in a fixed order, and a hashable ``treedef``.

    The treedef holds each container's type and keys, each static value, and each
    leaf's kind, dtype and shape: two arguments with equal treedefs have one signature.
    """
    leaves: list[tuple[Path, Any]] = []
    return leaves, _flatten(x, path, leaves)


def _flatten(x: Any, path: Path, leaves: list[tuple[Path, Any]]) -> Any:
    if is_leaf(x):
        leaves.append((path, x))
        return ("leaf", leaf_signature(x, path))
    kids = children(x)
    if kids is None:
        if is_traced(x):
            where = format_path(path) or "the argument"
            raise TraceError(f"{where} is a traced value of a trace that has ended (a tracer "
                             "kept from inside a traced function); pass arrays")
        return ("static", _static_key(x))
    return (type(x), tuple(k for k, _ in kids),
            tuple(_flatten(v, path + (k,), leaves) for k, v in kids))


def leaf_signature(x: Any, path: Path = ()) -> tuple[Any, ...]:
    if type(x) is float:
        return ("float",)
    arr = np.asarray(x)
    if arr.dtype not in DTYPE_NAMES:
        where = format_path(path) or "the argument"
        raise TraceError(f"{where} has dtype {arr.dtype}, which Yota does not support; "
                         "convert it to float32, float64, int32, int64 or bool (yota.grad "
                         "and yota.compile compute float16 arguments in float32 themselves)")
    return (DTYPE_NAMES[arr.dtype], arr.shape)


def _static_key(x: Any) -> Any:
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return (type(x), x)


def rebuild(x: Any, fn: Callable[[Path, Any], Any], path: Path = (),
            leaf: Callable[[Any], bool] = is_leaf) -> Any:
    """A copy of structure ``x`` with each leaf (``leaf(x)`` true) replaced by
    ``fn(path, leaf)``.

    Containers are shallow-copied (frozen dataclasses included), never mutated.
    """
    if leaf(x):
        return fn(path, x)
    kids = children(x)
    if kids is None:
        return x
    new = {k: rebuild(v, fn, path + (k,), leaf) for k, v in kids}
    if _is_namedtuple(x):
        return type(x)(*new.values())
    if isinstance(x, tuple):
        return tuple(new.values())
    if isinstance(x, list):
        return list(new.values())
    if isinstance(x, dict):
        return {k: new[k] for k, _ in kids}
    out = copy.copy(x)
    for k, v in new.items():
        object.__setattr__(out, k, v)
    return out


def rebuild_sequence(like: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """``items`` in a sequence of ``like``'s type (a list, tuple or NamedTuple)."""
    return type(like)(*items) if hasattr(type(like), "_fields") else type(like)(items)


def get_path(x: Any, path: Path) -> Any:
    for k in path:
        x = getattr(x, k) if is_attr_container(x) and isinstance(k, str) else x[k]
    return x


def format_path(path: Path, root: str = "") -> str:
    out = root
    for k in path:
        out += f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]"
    return out.lstrip(".")


# -- float16 arguments: computed in float32 (as JAX does on CPU), results cast back --------------
def has_half(args: Any) -> bool:
    """Whether a leaf of ``args`` is a float16 array or scalar (arrays at the top level
    answer at once: the common case costs a type check per argument)."""
    for a in args:
        if type(a) is np.ndarray:
            if a.dtype == np.float16:
                return True
        elif not isinstance(a, (float, int, str, type(None))) and _any_half(a):
            return True
    return False


def _any_half(x: Any) -> bool:
    if is_leaf(x):
        return np.asarray(x).dtype == np.float16
    kids = children(x)
    return kids is not None and any(_any_half(v) for _, v in kids)


def widen_half(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], bool]:
    """``args`` with float16 leaves as float32 copies, and whether the result of a
    function of them is float16 in NumPy: no float32 or float64 leaf among them."""
    wider = False

    def leaf(path: Path, x: Any) -> Any:
        nonlocal wider
        dt = np.asarray(x).dtype
        if dt == np.float16:
            return np.asarray(x, np.float32) if isinstance(x, np.ndarray) else np.float32(x)
        wider = wider or dt in (np.float32, np.float64) and type(x) is not float
        return x

    out = tuple(rebuild(a, leaf) for a in args)
    return out, not wider


def narrow_half(x: Any) -> Any:
    """``x`` (results) with float32 leaves cast to float16."""
    def leaf(path: Path, v: Any) -> Any:
        return v.astype(np.float16) if isinstance(v, (np.ndarray, np.generic)) and \
            v.dtype == np.float32 else v
    return rebuild(x, leaf)


def half_like(args: Any, path: Path, g: Any) -> Any:
    """Gradient ``g`` of the leaf at ``path`` of ``args`` in float16 if that leaf is."""
    if g is None or not isinstance(g, (np.ndarray, np.generic)):
        return g
    leaf = get_path(args, path)
    return g.astype(np.float16) if np.asarray(leaf).dtype == np.float16 else g
