"""Rewrites of products with an identity-like mask (``np.eye(n, m, k)``: an ``iota``
comparison the front end builds, or a small constant) into work on the diagonal alone:

- ``A + c * eye`` (``c`` a scalar) -> ``A`` with ``c`` added to diagonal ``k`` (a
  ``gather`` of the diagonal, an ``add``, a ``scatter`` back, in place when ``A`` dies);
- ``sum(X * eye)`` over the two matrix axes -> the sum of the gathered diagonal.

Neither is exact in IEEE arithmetic: off the diagonal NumPy adds ``c * 0.0`` (``+0.0``
turns ``-0.0`` into ``+0.0``; an infinite ``c`` gives NaN) and sums ``X * 0.0`` (NaN for
an infinite ``X``; another summation order). So they are ``fast_math`` rewrites; without
it the mask is computed inside the kernel that reads it (``iota`` ops fuse), one pass
over ``A`` and no data.
"""

from __future__ import annotations

import numpy as np

from ..core import Op, Value, make_op
from ..types import I64
from .patterns import Pattern, Rewrite, View, chain, new


def _iota_axis(v: Value, m: View) -> int | None:
    op = m.producer(v, "iota")
    return op.attrs["axis"] if op is not None else None


def _row_offset(v: Value, m: View) -> int | None:
    """k if ``v`` is the row index (an iota along axis -2) plus the constant k."""
    nd = v.ndim
    if _iota_axis(v, m) == nd - 2:
        return 0
    op = m.producer(v, "add")
    if op is None:
        return None
    for r, c in (op.operands, op.operands[::-1]):
        s = m.splat(c)
        if _iota_axis(r, m) == nd - 2 and s is not None and s.dtype.kind in "iu":
            return int(s)
    return None


def mask_diagonal(v: Value, m: View) -> int | None:
    """k if ``v`` is 1 on diagonal k of its last two axes and 0 elsewhere (``np.eye(n,
    m, k)`` as the front end computes it, or as a constant), else None."""
    if v.ndim < 2 or v.dtype.kind == "b":
        return None
    cv = m.producer(v, "convert")
    eq = m.producer(cv.operands[0], "eq") if cv is not None else None
    if eq is not None:
        for r, c in (eq.operands, eq.operands[::-1]):
            k = _row_offset(r, m)
            if k is not None and _iota_axis(c, m) == v.ndim - 1:
                return k
        return None
    const = m.producer(v, "const")
    if const is None or v.type.size == 0:
        return None
    value = np.asarray(const.attrs["value"])
    rows, cols = np.nonzero(value.reshape(-1, *v.shape[-2:])[0])
    if len(rows) == 0:
        return None
    k = int(cols[0] - rows[0])
    eye = np.eye(v.shape[-2], v.shape[-1], k, dtype=v.dtype)
    return k if np.array_equal(value, np.broadcast_to(eye, v.shape)) else None


def _diagonal(x: Value, k: int, loc: str | None) -> tuple[list[Op], Value, Value]:
    """Ops giving the index arrays (i, j) of diagonal ``k`` of ``x``'s last two axes."""
    n, mcols = x.shape[-2:]
    d = max(0, min(n + min(k, 0), mcols - max(k, 0)))
    ops: list[Op] = []
    idx = []
    for start in (max(-k, 0), max(k, 0)):
        ops.append(make_op("iota", [], {"shape": (d,), "axis": 0, "dtype": I64}, loc))
        if start:
            ops.append(make_op("const", [], {"value": np.broadcast_to(np.int64(start), (d,))},
                               loc))
            ops.append(new("add", ops[-2].result, ops[-1].result, loc=loc))
        idx.append(ops[-1].result)
    return ops, idx[0], idx[1]


def _scalar(v: Value, m: View) -> Value | None:
    """The one-element value ``v`` broadcasts (a scalar times the mask), else None."""
    b = m.producer(v, "broadcast")
    if b is not None and b.operands[0].type.size == 1:
        return b.operands[0]
    return v if v.type.size == 1 else None


def _scaled_mask(v: Value, m: View) -> tuple[Value | None, int] | None:
    """(c, k) if ``v`` is ``c * eye(k)`` (c None: the mask alone), else None."""
    k = mask_diagonal(v, m)
    if k is not None:
        return None, k
    op = m.producer(v, "mul")
    if op is None:
        return None
    for a, b in (op.operands, op.operands[::-1]):
        k, c = mask_diagonal(b, m), _scalar(a, m)
        if k is not None and c is not None:
            return c, k
    return None


def fm_add_diagonal(op: Op, m: View) -> Rewrite | None:
    """A + c * eye(k) -> A with c added to its diagonal k."""
    for a, s in (op.operands, op.operands[::-1]):
        found = _scaled_mask(s, m)
        if found is None:
            continue
        c, k = found
        ops, i, j = _diagonal(a, k, op.loc)
        axis = a.ndim - 2
        ops.append(new("gather", a, i, j, axis=axis, loc=op.loc))
        diag = ops[-1].result
        if c is None:
            ops.append(make_op("const", [], {"value": np.broadcast_to(
                np.ones((), a.dtype), diag.shape)}, op.loc))
        else:
            ops.append(new("reshape", c, shape=(), loc=op.loc))
            ops.append(new("broadcast", ops[-1].result, shape=diag.shape, loc=op.loc))
        ops.append(new("add", diag, ops[-1].result, loc=op.loc))
        return chain(*ops, new("scatter", a, ops[-1].result, i, j, axis=axis, loc=op.loc))
    return None


def fm_sum_diagonal(op: Op, m: View) -> Rewrite | None:
    """sum(X * eye(k)) over (at least) the two matrix axes -> sum of X's diagonal k."""
    x = op.operands[0]
    axes, nd = op.attrs["axes"], x.ndim
    p = m.producer(x, "mul")
    if p is None or nd < 2 or not {nd - 2, nd - 1} <= set(axes):
        return None
    for a, b in (p.operands, p.operands[::-1]):
        k = mask_diagonal(b, m)
        if k is None:
            continue
        ops, i, j = _diagonal(a, k, op.loc)
        ops.append(new("gather", a, i, j, axis=nd - 2, loc=op.loc))
        kept = tuple(ax for ax in axes if ax < nd - 2) + (nd - 2,)
        return chain(*ops, new("sum", ops[-1].result, axes=kept, loc=op.loc))
    return None


FAST_MATH_DIAGONAL: dict[str, list[Pattern]] = {
    "add": [fm_add_diagonal],
    "sum": [fm_sum_diagonal],
}
