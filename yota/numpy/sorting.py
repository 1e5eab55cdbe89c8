"""Sorting and order statistics: ``sort``, ``argsort`` (indices, no gradient),
``partition`` (sorted entirely, which is one valid partition), ``median``, ``percentile``
and ``quantile`` (NumPy's default linear method), and ``nanmedian``, ``nanpercentile``,
``nanquantile`` (the positions depend on each slice's count of non-NaN values, so the
values are gathered).

A sort is a bitonic sorting network along the last axis (the axis is moved there first),
padded to a power of two with elements marked to sort after everything: log2(n)(log2(n)+1)/2 compare-exchange steps, each a
few elementwise ops on the whole array, so it vectorizes and runs on every backend. A
compare-exchange moves values with ``select``, so the gradient is routed back through
the same permutation (ties keep their places). NaNs sort last, as in NumPy. ``argsort``
carries the indices through the same network; among equal values its order may differ
from NumPy's (NumPy's default sort is not stable either).

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sort(x)[-1] * 2.0, np.array([3.0, 7.0, 1.0]))
    >>> g[0].tolist()
    [0.0, 2.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .axes import norm_axes
from .registry import LoweringContext, register
from .static import operand_along


def _to_last(b: Builder, x: Value, axis: int) -> Value:
    if axis == x.ndim - 1:
        return x
    perm = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
    return b.emit("transpose", x, perm=perm)


def _from_last(b: Builder, x: Value, axis: int) -> Value:
    if axis == x.ndim - 1:
        return x
    perm = list(range(x.ndim - 1))
    perm.insert(axis, x.ndim - 1)
    return b.emit("transpose", x, perm=tuple(perm))


def _pad(b: Builder, x: Value, n: int, value: Any) -> Value:
    if n == x.shape[-1]:
        return x
    fill = b.const(value, x.dtype, x.shape[:-1] + (n - x.shape[-1],))
    return b.emit("concatenate", x, fill, axis=x.ndim - 1)


def _halves(b: Builder, x: Value, j: int) -> tuple[Value, Value]:
    """Elements i and i + j of every block of 2j along the last axis."""
    lead, n = x.shape[:-1], x.shape[-1]
    y = b.reshape_to(x, lead + (n // (2 * j), 2, j))
    k = len(lead)
    start = (0,) * (k + 3)
    stop = lead + (n // (2 * j), 1, j)
    one = (1,) * (k + 3)
    a = b.emit("slice", y, start=start, stop=stop, step=one)
    hi = b.emit("slice", y, start=(0,) * k + (0, 1, 0), stop=lead + (n // (2 * j), 2, j),
                step=one)
    return a, hi


def _join(b: Builder, a: Value, c: Value, shape: tuple[int, ...]) -> Value:
    return b.reshape_to(b.emit("concatenate", a, c, axis=a.ndim - 2), shape)


def _greater(b: Builder, a: Value, c: Value) -> Value:
    """a > c with NaN greater than everything (NumPy's sort order)."""
    if a.dtype.kind != "f":
        return b.emit("gt", a, c)
    nan_a, nan_c = b.emit("isnan", a), b.emit("isnan", c)
    return b.emit("or", b.emit("gt", a, c), b.emit("and", nan_a, b.emit("not", nan_c)))


def _network(b: Builder, keys: Value, carried: list[Value], pad: Value | None
             ) -> tuple[Value, list[Value]]:
    """Bitonic sort of ``keys`` along the last axis (a power of two long); ``carried``
    values of the same shape are permuted alike. ``pad`` marks the padding, which sorts
    after everything (NaNs included)."""
    n, shape = keys.shape[-1], keys.shape
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            a, c = _halves(b, keys, j)
            later = _greater(b, a, c)
            earlier = _greater(b, c, a)
            if pad is not None:  # padding first: a is later if it pads and c does not
                pa, pc = _halves(b, pad, j)
                same = b.emit("eq", pa, pc)
                later = b.emit("select", same, later, pa)
                earlier = b.emit("select", same, earlier, pc)
            blocks = np.arange(n // (2 * j)) * 2 * j
            ascending = ((blocks & k) == 0).reshape(-1, 1, 1)
            asc = b.const(np.broadcast_to(ascending, a.shape), np.bool_)
            swap = b.emit("select", asc, later, earlier)
            keys = _join(b, b.emit("select", swap, c, a), b.emit("select", swap, a, c), shape)
            moved = []
            for v in carried + ([pad] if pad is not None else []):
                va, vc = _halves(b, v, j)
                moved.append(_join(b, b.emit("select", swap, vc, va),
                                   b.emit("select", swap, va, vc), shape))
            if pad is not None:
                pad = moved.pop()
            carried = moved
            j //= 2
        k *= 2
    return keys, carried


def sort_last(b: Builder, x: Value, with_indices: bool) -> tuple[Value, Value | None]:
    """``x`` sorted along its last axis, and the indices that sort it (when asked)."""
    n = x.shape[-1]
    if n <= 1:
        idx = b.const(np.zeros(x.shape, np.int64)) if with_indices else None
        return x, idx
    size = 1 << (n - 1).bit_length()
    keys = _pad(b, x, size, 0)
    pad = None
    if size != n:
        flags = np.broadcast_to(np.arange(size) >= n, keys.shape)
        pad = b.const(flags, np.bool_)
    carried = []
    if with_indices:
        ids = np.broadcast_to(np.arange(size, dtype=np.int64), keys.shape)
        carried.append(b.const(ids))
    keys, carried = _network(b, keys, carried, pad)
    start, stop = (0,) * x.ndim, x.shape
    step = (1,) * x.ndim
    out = b.emit("slice", keys, start=start, stop=stop, step=step)
    idx = b.emit("slice", carried[0], start=start, stop=stop, step=step) if carried else None
    return out, idx


def _check_kind(kind: Any, order: Any) -> None:
    if order is not None:
        raise UnsupportedError("sorting by fields (order=) applies to structured arrays")


@register("sort", np.sort, np.sort)
def _sort(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = -1, kind: Any = None,
          order: Any = None, *, stable: Any = None) -> Value:
    _check_kind(kind, order)
    x, ax = operand_along(L, a, axis, outs[0].dtype, "np.sort")
    s, _ = sort_last(L.b, _to_last(L.b, x, ax), False)
    return L.b.reshape_to(_from_last(L.b, s, ax), outs[0].shape)


@register("argsort", np.argsort, np.argsort)
def _argsort(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = -1,
             kind: Any = None, order: Any = None, *, stable: Any = None) -> Value:
    _check_kind(kind, order)
    x, ax = operand_along(L, a, axis, None, "np.argsort")
    _, idx = sort_last(L.b, _to_last(L.b, x, ax), True)
    assert idx is not None
    return L.b.convert_to(L.b.reshape_to(_from_last(L.b, idx, ax), outs[0].shape),
                          outs[0].dtype)


@register("partition", np.partition, np.partition)
def _partition(L: LoweringContext, outs: list[TensorType], a: Any, kth: Any, axis: Any = -1,
               kind: Any = None, order: Any = None) -> Value:
    return _sort(L, outs, a, axis, None, order)


def _quantiles(L: LoweringContext, s: Value, qs: np.ndarray, o: TensorType) -> Value:
    """Linear interpolation (NumPy's default method) between the sorted values along the
    last axis of ``s``, at the fractions ``qs``; the quantile axis goes first."""
    b = L.b
    n, k = s.shape[-1], s.ndim - 1

    def take(i: int) -> Value:
        return b.reshape_to(b.emit("slice", s, start=(0,) * k + (i,),
                                   stop=s.shape[:-1] + (i + 1,), step=(1,) * s.ndim),
                            s.shape[:-1])

    vals = []
    for q in qs.reshape(-1):
        pos = (n - 1) * float(q)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        t = pos - lo
        a_, c_ = take(lo), take(hi)
        diff = b.emit("sub", c_, a_)
        tt = b.const(t, s.dtype, a_.shape)
        # NumPy's lerp: a + (b - a) t below one half, b - (b - a)(1 - t) above
        v = b.emit("add", a_, b.emit("mul", diff, tt)) if t < 0.5 else b.emit(
            "sub", c_, b.emit("mul", diff, b.const(1.0 - t, s.dtype, a_.shape)))
        vals.append(b.reshape_to(v, (1,) + v.shape))
    out = vals[0] if len(vals) == 1 else b.emit("concatenate", *vals, axis=0)
    return b.reshape_to(out, qs.shape + s.shape[:-1])


def _nan_if_any(L: LoweringContext, x: Value, r: Value) -> Value:
    """NaN where the slice holds a NaN (NumPy's median and percentile)."""
    if x.dtype.kind != "f":
        return r
    anynan = L.b.emit("max", L.b.emit("isnan", x), axes=(x.ndim - 1,))
    anynan = L.b.broadcast_to(L.b.reshape_to(anynan, (1,) * (r.ndim - anynan.ndim)
                                             + anynan.shape), r.shape)
    return L.b.emit("select", anynan, L.b.const(np.nan, r.dtype, r.shape), r)


def _sorted_rows(L: LoweringContext, o: TensorType, a: Any, qs: np.ndarray, axis: Any,
                 method: str) -> tuple[Value, Value]:
    """The checked quantile arguments, and ``a`` as rows (the kept axes) of the reduced
    axes' elements: the rows, and the rows sorted."""
    if method != "linear":
        raise UnsupportedError(f"method={method!r} of percentile/quantile: only 'linear' "
                               "(NumPy's default) is supported")
    if np.any((qs < 0) | (qs > 1)):
        raise UnsupportedError("quantiles must be in [0, 1] (percentiles in [0, 100])")
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    y = L.b.emit("transpose", x, perm=tuple(perm)) if perm != list(range(x.ndim)) else x
    y = L.b.reshape_to(y, (int(np.prod([x.shape[i] for i in keep])),
                           int(np.prod([x.shape[i] for i in axes]))))
    return y, sort_last(L.b, y, False)[0]


def _order_statistic(L: LoweringContext, o: TensorType, a: Any, qs: np.ndarray, axis: Any,
                     method: str) -> Value:
    y, s = _sorted_rows(L, o, a, qs, axis, method)
    return L.b.reshape_to(_nan_if_any(L, y, _quantiles(L, s, qs, o)), o.shape)


@register("median", np.median, np.median)
def _median(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
            out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Value:
    return _order_statistic(L, outs[0], a, np.array(0.5), axis, "linear")


@register("quantile", np.quantile, np.quantile)
def _quantile(L: LoweringContext, outs: list[TensorType], a: Any, q: Any, axis: Any = None,
              out: Any = None, overwrite_input: bool = False, method: str = "linear",
              keepdims: bool = False, *, weights: Any = None) -> Value:
    return _order_statistic(L, outs[0], a, _static_q(L, q, 1.0), axis, method)


@register("percentile", np.percentile, np.percentile)
def _percentile(L: LoweringContext, outs: list[TensorType], a: Any, q: Any, axis: Any = None,
                out: Any = None, overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: Any = None) -> Value:
    return _order_statistic(L, outs[0], a, _static_q(L, q, 100.0), axis, method)


def _static_q(L: LoweringContext, q: Any, scale: float) -> np.ndarray:
    if L.is_traced(q):
        raise UnsupportedError("the quantile q decides which elements are read: it must be a "
                               "constant of the trace (a Python number or a plain array)")
    return np.asarray(q, dtype=np.float64) / scale


def _nan_quantiles(L: LoweringContext, s: Value, valid: Value, qs: np.ndarray) -> Value:
    """Linear interpolation between the sorted non-NaN values of each row of ``s`` (NaNs
    sort last; ``valid`` counts the others, per row): the positions depend on the data, so
    the values are gathered. A row with no value gives NaN, as NumPy (with a warning)."""
    b = L.b
    rows, m = s.shape[0], s.shape[1]
    row_ids = b.const(np.arange(rows, dtype=np.int64))
    top = b.const(float(max(m - 1, 0)), s.dtype, (rows,))
    zero = b.const(0.0, s.dtype, (rows,))
    none = b.emit("eq", valid, zero)

    def at(pos: Value) -> Value:
        i = b.convert_to(b.emit("minimum", b.emit("maximum", pos, zero), top), np.int64)
        return b.emit("gather", s, row_ids, i, axis=0)

    vals = []
    for q in qs.reshape(-1):
        pos = b.emit("mul", b.emit("sub", valid, b.const(1.0, s.dtype, (rows,))),
                     b.const(float(q), s.dtype, (rows,)))
        lo, hi = b.emit("floor", pos), b.emit("ceil", pos)
        t = b.emit("sub", pos, lo)
        a_, c_ = at(lo), at(hi)
        d = b.emit("sub", c_, a_)
        below = b.emit("add", a_, b.emit("mul", d, t))
        above = b.emit("sub", c_, b.emit("mul", d, b.emit("sub", b.const(1.0, s.dtype, (rows,)),
                                                           t)))
        v = b.emit("select", b.emit("lt", t, b.const(0.5, s.dtype, (rows,))), below, above)
        v = b.emit("select", none, b.const(np.nan, s.dtype, (rows,)), v)
        vals.append(b.reshape_to(v, (1, rows)))
    return vals[0] if len(vals) == 1 else b.emit("concatenate", *vals, axis=0)


def _nan_order_statistic(L: LoweringContext, o: TensorType, a: Any, qs: np.ndarray,
                         axis: Any, method: str) -> Value:
    y, s = _sorted_rows(L, o, a, qs, axis, method)
    valid = L.b.emit("sum", L.b.convert_to(L.b.emit("not", L.b.emit("isnan", y)), y.dtype),
                     axes=(1,))
    return L.b.reshape_to(_nan_quantiles(L, s, valid, qs), o.shape)


@register("nanmedian", np.nanmedian, np.nanmedian)
def _nanmedian(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
               out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Value:
    return _nan_order_statistic(L, outs[0], a, np.array(0.5), axis, "linear")


@register("nanquantile", np.nanquantile, np.nanquantile)
def _nanquantile(L: LoweringContext, outs: list[TensorType], a: Any, q: Any, axis: Any = None,
                 out: Any = None, overwrite_input: bool = False, method: str = "linear",
                 keepdims: bool = False, *, weights: Any = None) -> Value:
    return _nan_order_statistic(L, outs[0], a, _static_q(L, q, 1.0), axis, method)


@register("nanpercentile", np.nanpercentile, np.nanpercentile)
def _nanpercentile(L: LoweringContext, outs: list[TensorType], a: Any, q: Any,
                   axis: Any = None, out: Any = None, overwrite_input: bool = False,
                   method: str = "linear", keepdims: bool = False, *,
                   weights: Any = None) -> Value:
    return _nan_order_statistic(L, outs[0], a, _static_q(L, q, 100.0), axis, method)
