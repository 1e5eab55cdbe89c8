"""Derivative rules of integer-array indexing and of writes: gather and scatter_add
transpose each other; an overwrite (``update_slice``, ``scatter``) passes the cotangent
through where it did not write, and to the update where it did."""

from __future__ import annotations

import numpy as np

from ..core import Builder, Op, Value
from ..ops import iota
from ..types import I64
from .registry import Grads, Rule


def _gather(b: Builder, op: Op, dy: Value) -> Grads:
    x, *idx = op.operands
    dx = b.scatter_add(dy, *idx, axis=op.attrs["axis"], shape=x.shape)
    return [dx] + [None] * len(idx)


def _scatter_add(b: Builder, op: Op, dy: Value) -> Grads:
    _, *idx = op.operands
    return [b.gather(dy, *idx, axis=op.attrs["axis"])] + [None] * len(idx)


def _update_slice(b: Builder, op: Op, dy: Value) -> Grads:
    u = op.operands[1]
    region = {k: op.attrs[k] for k in ("start", "stop", "step")}
    dx = b.update_slice(dy, b.const(0, u.dtype, u.shape), **region)
    return [dx, b.slice(dy, **region)]


def _scatter(b: Builder, op: Op, dy: Value) -> Grads:
    """Where an index repeats only the last update is kept: the others get no gradient.
    Which one is last is found by scattering each update's position and reading it back."""
    x, u, *idx = op.operands
    axis = op.attrs["axis"]
    dx = b.scatter(dy, b.const(0, u.dtype, u.shape), *idx, axis=axis)
    if iota.is_small(u.shape, I64):
        pos = b.const(np.arange(u.type.size, dtype=np.int64).reshape(u.shape), I64)
    else:  # computed, not stored
        pos = b.reshape_to(iota.index_along(b, (u.type.size,), 0), u.shape)
    kept = b.scatter(b.const(-1, I64, x.shape), pos, *idx, axis=axis)
    won = b.eq(b.gather(kept, *idx, axis=axis), pos)
    du = b.select(won, b.gather(dy, *idx, axis=axis), b.const(0, u.dtype, u.shape))
    return [dx, du] + [None] * len(idx)


RULES_INDEX: dict[str, Rule] = {
    "gather": _gather,
    "scatter_add": _scatter_add,
    "update_slice": _update_slice,
    "scatter": _scatter,
}
