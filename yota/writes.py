"""Writes into traced arrays, functionalized.

A write into a traced array ``t`` (``t[key] = v``, ``t += v``, ``np.add.at``, ``out=``...)
is performed on the example values (NumPy's own semantics, views included) and recorded
as a new SSA version of ``t``: a ``setitem``/``setmask``/``add_at`` entry whose result
is the whole array after the write. Up the chain of views to the base, each parent gets a
new version too (``ViewLink.undo``); the storage's version is bumped, so every other view
of the memory is derived again from its parent when it is next read (``ViewLink.redo``).
Arrays the caller owns (arguments and views of them) are never written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import UnsupportedError

from .recording import OperandError, record_entry, to_value, tracers_in
from .tape import Var
from .traced import TracedValue
from .userloc import where


def write_into(t: TracedValue, what: str, fix: str, new_var: Callable[[], Var],
               concrete: Callable[[], None], const: bool) -> None:
    """Write into ``t``: ``new_var()`` records its new version, ``concrete()`` writes the
    example values; ``const``: the value written is a constant of the trace."""
    s = t._store
    if s is None:
        raise TypeError(f"'{type(t.value).__name__}' object does not support item "
                        f"assignment (a NumPy scalar, at {where()})")
    if s.owner is not None:
        raise UnsupportedError(
            f"{what} at {where()} would mutate {s.owner}, an array the caller owns: Yota "
            f"never changes the caller's arrays. {fix}")
    if not t.value.flags.writeable:
        raise ValueError(f"assignment destination is read-only (at {where()})")
    if s.const:
        if const:  # constants stay constants: nothing to record
            concrete()
            s.version += 1
            return
        root = t
        while root._link is not None:
            root = root._link.parent
        made = root.made
        s.const = False
        s.version += 1  # every view is derived from the root again
        root._var, root._ver = t._ctx.const_var(root.value, made=made), s.version
    chain = [(t, new_var())]
    child = t
    while child._link is not None:
        chain.append((child._link.parent, child._link.undo(child, chain[-1][1])))
        child = child._link.parent
    concrete()
    s.version += 1
    for tr, var in chain:
        tr._var, tr._ver = var, s.version


def stored_shape(t: TracedValue, key: Any, value: Any) -> tuple[int, ...]:
    """The shape of ``t[key]``; a NumPy error (as OperandError) if ``value`` cannot be
    stored there."""
    region = t.value[to_value(key)]
    probe = np.ndarray(np.shape(region), t.dtype)
    try:
        probe[...] = to_value(value)
    except ValueError as e:
        raise OperandError(f"x[...] = value at {where()}: {e}") from e
    return probe.shape


def _same_region(v: Any, region: Any) -> bool:
    return (isinstance(v, np.ndarray) and isinstance(region, np.ndarray)
            and v.__array_interface__["data"] == region.__array_interface__["data"]
            and v.shape == region.shape and v.strides == region.strides)


def assign(t: TracedValue, key: Any, value: Any, what: str, fix: str) -> None:
    """``t[key] = value`` (a basic or integer-array index), NumPy's casting included."""
    if isinstance(value, TracedValue) and value._store is not None and \
            value._store is t._store and value._ver == value._store.version and \
            _same_region(value.value, t.value[to_value(key)]):
        return  # x[i] += v: the view x[i] was written already
    vshape = stored_shape(t, key, value)
    const = all(x.is_const for x in tracers_in((key, value)))
    cur = t.value

    def concrete() -> None:
        cur[to_value(key)] = to_value(value)

    write_into(t, what, fix, lambda: record_entry("setitem", t, key, value, vshape=vshape),
               concrete, const)


def assign_mask(t: TracedValue, mask: TracedValue, value: Any, left: bool = True) -> None:
    """``t[mask] = value`` with a traced boolean mask (``left``: the mask indexes the
    leading axes, as ``x[mask]`` does; else it broadcasts as ``where=`` does)."""
    if left and mask.shape != t.shape[:mask.ndim]:
        raise IndexError(f"boolean index of shape {mask.shape} does not match the indexed "
                         f"array of shape {t.shape} (at {where()})")
    full = isinstance(value, MaskedUpdate)
    v = value.full if isinstance(value, MaskedUpdate) else value
    vs = np.shape(to_value(v))
    rest = t.shape[mask.ndim:] if left else t.shape
    trimmed = vs[1:] if left and len(vs) == len(rest) + 1 and vs[:1] == (1,) else vs
    if not full and (len(trimmed) > len(rest) or np.broadcast_shapes(trimmed, rest) != rest):
        raise UnsupportedError(
            f"x[mask] = v at {where()} with v of shape {vs}: one value per selected element "
            "depends on the data. Write x = np.where(mask, v, x) with v of x's shape, or "
            "store one value (or one row) for every selected element")
    const = all(x.is_const for x in tracers_in((mask, v)))
    cur = t.value

    def concrete() -> None:
        m = np.broadcast_to(np.asarray(mask.value).reshape(
            mask.shape + (1,) * (t.ndim - mask.ndim)) if left else mask.value, t.shape)
        np.copyto(cur, np.broadcast_to(np.asarray(to_value(v)), t.shape), casting="unsafe",
                  where=m)

    write_into(t, "x[mask] = ...", "Use np.where(mask, v, x)",
               lambda: record_entry("setmask", t, mask, v, left=left), concrete, const)


class MaskedUpdate:
    """The value of ``x[mask] op= v`` before it is stored back: ``x op v`` everywhere."""

    def __init__(self, x: TracedValue, mask: TracedValue, full: TracedValue) -> None:
        self.x, self.mask, self.full = x, mask, full

