"""Batching rules of indexing (``gather``, ``scatter_add``, ``scatter``), ``matmul``, the
LAPACK ops and ``guard``.

Indexing with unbatched indices shifts the indexed axis past the batch axis; with
batched indices every example indexes its own slice: the batch axis is moved next to the
indexed axes and indexed by an ``iota`` of the examples' numbers. A ``matmul`` with one
unbatched matrix folds the examples into the other's rows (or columns): one GEMM for the
batch; two batched operands give a batched product (an outer product when the inner
dimension is 1: an elementwise product, fused). LAPACK ops batch over leading axes by
definition. A guard on a batched value checks that every example takes the branch the
trace took.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Op, Value
from ..ops.lapack import LAPACK_OPS
from .base import Batched, VmapError, all_batched, batch_rule, move_axis, to_batched


def _example_index(bt: Any, like: Value) -> Value:
    """The example number at every position of a batched index array ``like``."""
    return bt.b.iota(shape=like.shape, axis=0, dtype=like.dtype)


@batch_rule("gather")
def _gather(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    x, *idx = xs
    a = op.attrs["axis"]
    if not any(bat[1:]):
        return [(bt.emit(op, xs, axis=a + 1)[0], True)]
    idx = all_batched(bt, idx, bat[1:])
    if not bat[0]:  # x[..., i_b] has the batch axis where the indices are
        return [(move_axis(bt.b, bt.emit(op, [x] + idx)[0], a, 0), True)]
    xt = move_axis(bt.b, x, 0, a)
    y = bt.emit(op, [xt, _example_index(bt, idx[0])] + idx)[0]
    return [(move_axis(bt.b, y, a, 0), True)]


@batch_rule("scatter_add")
def _scatter_add(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    u, *idx = xs
    a, shape = op.attrs["axis"], tuple(op.attrs["shape"])
    if not any(bat[1:]):
        return [(bt.emit(op, xs, axis=a + 1, shape=(bt.size,) + shape)[0], True)]
    idx = all_batched(bt, idx, bat[1:])
    ut = move_axis(bt.b, to_batched(bt.b, u, bat[0], bt.size), 0, a)
    y = bt.emit(op, [ut, _example_index(bt, idx[0])] + idx,
                shape=shape[:a] + (bt.size,) + shape[a:])[0]
    return [(move_axis(bt.b, y, a, 0), True)]


@batch_rule("scatter")
def _scatter(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    x, u, *idx = all_batched(bt, xs[:2], bat[:2]) + xs[2:]
    a = op.attrs["axis"]
    if not any(bat[2:]):
        return [(bt.emit(op, [x, u] + idx, axis=a + 1)[0], True)]
    idx = all_batched(bt, idx, bat[2:])
    xt, ut = move_axis(bt.b, x, 0, a), move_axis(bt.b, u, 0, a)
    y = bt.emit(op, [xt, ut, _example_index(bt, idx[0])] + idx)[0]
    return [(move_axis(bt.b, y, a, 0), True)]


@batch_rule("matmul")
def _matmul(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    x, y = xs
    b = bt.b
    if bat[0] and bat[1]:
        if x.shape[-1] == 1:  # outer products: [n,..,m,1] * [n,..,1,p]
            shape = x.shape[:-1] + y.shape[-1:]
            return [(b.mul(b.broadcast_to(x, shape), b.broadcast_to(y, shape)), True)]
        return [(b.matmul(x, y), True)]
    if bat[0] and y.ndim == 2 and x.shape[-1] == 1:  # outer products with a fixed row
        shape = x.shape[:-1] + y.shape[-1:]
        return [(b.mul(b.broadcast_to(x, shape), b.broadcast_to(y, shape)), True)]
    if bat[0] and y.ndim == 2:  # [n*..*m, k] @ [k, p]
        rows = b.reshape_to(x, (int(np.prod(x.shape[:-1])), x.shape[-1]))
        return [(b.reshape_to(b.matmul(rows, y), x.shape[:-1] + y.shape[-1:]), True)]
    if bat[1] and x.ndim == 2:
        return [(_left_fixed(bt, x, y), True)]
    return [(b.matmul(*all_batched(bt, xs, bat)), True)]


def _left_fixed(bt: Any, x: Value, y: Value) -> Value:
    """``x [m, k] @ y [n, k, p]`` as one GEMM: ``(y_rowsᵀ xᵀ)`` when ``p`` is 1 (a
    matrix of the examples' vectors times ``xᵀ``), else ``x @ [k, n*p]``."""
    b, n = bt.b, bt.size
    m, k = x.shape
    p = y.shape[-1]
    if p == 1:
        out = b.matmul(b.reshape_to(y, (n, k)), b.transpose(x, perm=(1, 0)))
        return b.reshape_to(out, (n, m, 1))
    cols = b.reshape_to(move_axis(b, y, 0, 1), (k, n * p))
    out = b.reshape_to(b.matmul(x, cols), (m, n, p))
    return move_axis(b, out, 1, 0)


@batch_rule(*LAPACK_OPS)
def _lapack(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(r, True) for r in bt.emit(op, all_batched(bt, xs, bat))]


@batch_rule("guard")
def _guard(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    """``guard(all examples hold)``: each example converts as the trace did."""
    b, x = bt.b, xs[0]
    kind, expected = op.attrs["kind"], op.attrs["expected"]
    if kind == "bool":
        truth = x if x.dtype == np.bool_ else b.ne(x, b.const(0, x.dtype, x.shape))
        ok = b.eq(truth, b.const(bool(expected), np.bool_, x.shape))
    elif kind == "int" and x.dtype.kind == "f":  # int() truncates: e <= x < e+1 for e > 0
        e = int(expected)
        low = b.gt(x, _c(b, e - 1, x)) if e <= 0 else b.ge(x, _c(b, e, x))
        high = b.lt(x, _c(b, e + 1, x)) if e >= 0 else b.le(x, _c(b, e, x))
        ok = b.emit("and", low, high)
    else:
        value = int(expected) if kind == "int" else float(expected)
        ok = b.eq(x, b.const(value, x.dtype, x.shape))
        if kind == "float" and value != value:
            ok = b.isnan(x)
    bad = b.sum(b.convert_to(b.emit("not", ok), np.int64), axes=tuple(range(x.ndim)))
    held = b.eq(bad, b.const(0, np.int64, ()))
    with b.at(f"{op.loc or 'a guard'} (every example of a vmapped batch)"):
        b.guard(held, expected=True, kind="bool")
    return []


def _c(b: Any, v: float, like: Value) -> Value:
    return b.const(float(v), like.dtype, like.shape)


@batch_rule("fused")
def _fused(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    raise VmapError("vmap batches programs before fusion; a 'fused' kernel cannot be "
                    f"batched (at {op.loc})")
