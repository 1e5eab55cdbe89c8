"""Small IR-building helpers shared by the rule tables."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import Builder, Value


def full_like(b: Builder, x: Value, c: float) -> Value:
    """A splat constant ``c`` of ``x``'s type."""
    return b.const(c, x.dtype, x.shape)


def scale(b: Builder, x: Value, c: float) -> Value:
    """``x * c`` for a Python scalar ``c``."""
    return b.mul(x, full_like(b, x, c))


def unreduce(b: Builder, y: Value, shape: Sequence[int], axes: Sequence[int]) -> Value:
    """Broadcast ``y``, reduced over ``axes`` of ``shape``, back to ``shape``."""
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
    return b.broadcast_to(b.reshape_to(y, kept), shape)


def mask(b: Builder, cond: Value, like: Value) -> Value:
    """The bool ``cond`` as 0/1 in ``like``'s dtype."""
    return b.convert_to(cond, like.dtype)


def swap_last(b: Builder, x: Value) -> Value:
    """Swap the last two axes (the matrix transpose of a batch of matrices)."""
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return b.transpose(x, perm=perm)


def add(b: Builder, x: Value, y: Value) -> Value:
    """Emit the ``add`` op (``Builder.add`` appends an op, so it cannot be called as one)."""
    return b.emit("add", x, y)
