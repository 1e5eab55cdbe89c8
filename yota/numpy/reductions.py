"""Reductions: ``sum``, ``prod``, ``max``, ``min``, ``mean``, ``var``, ``std``, ``any``,
``all``, ``count_nonzero``, ``argmax`` and ``argmin`` (``keepdims`` as a final reshape)."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.types import TensorType

from .axes import norm_axes
from .registry import Lower, LoweringContext, register


def _reduce(L: LoweringContext, ir_name: str, x: Value, axes: tuple[int, ...], keepdims: bool,
            out: TensorType) -> Value:
    r = L.b.emit(ir_name, x, axes=axes)
    return L.b.reshape_to(r, out.shape) if keepdims else r


def _reduction(ir_name: str) -> Lower:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
              out: Any = None, keepdims: bool = False, initial: Any = None,
              where: Any = None) -> Value:
        o = outs[0]
        x = L.operand(a, o.dtype, None)
        if where is not None:  # sum(where=mask): the masked-out elements count as 0
            x = masked(L, x, where, 0.0)
        return _reduce(L, ir_name, x, norm_axes(axis, x.ndim), keepdims, o)

    return lower


def masked(L: LoweringContext, x: Value, where: Any, fill: float) -> Value:
    """``x`` with ``fill`` where the (broadcast) mask ``where`` is False."""
    m = L.operand(where, np.bool_, x.shape)
    return L.b.emit("select", m, x, L.b.const(fill, x.dtype, x.shape))


def _logical(ir_name: str, empty: bool) -> Lower:
    """np.any (max over bool) and np.all (min over bool); over no elements, ``empty``."""

    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
              out: Any = None, keepdims: bool = False, where: Any = None) -> Value:
        o = outs[0]
        x = L.operand(a, np.bool_, None)
        axes = norm_axes(axis, x.ndim)
        if any(x.shape[i] == 0 for i in axes):
            return L.b.const(empty, np.bool_, o.shape)
        return _reduce(L, ir_name, x, axes, keepdims, o)

    return lower


register("any", np.any, np.any)(_logical("max", False))
register("all", np.all, np.all)(_logical("min", True))


@register("count_nonzero", np.count_nonzero, np.count_nonzero)
def _count_nonzero(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, *,
                   keepdims: bool = False) -> Value:
    o = outs[0]
    x = L.operand(a, np.bool_, None)
    counts = L.b.convert_to(x, o.dtype)
    return _reduce(L, "sum", counts, norm_axes(axis, x.ndim), keepdims, o)


register("sum", np.sum, np.sum)(_reduction("sum"))
register("prod", np.prod, np.prod)(_reduction("prod"))
register("max", np.max, np.max, np.amax)(_reduction("max"))
register("min", np.min, np.min, np.amin)(_reduction("min"))


@register("mean", np.mean, np.mean)
def _mean(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
          out: Any = None, keepdims: bool = False, where: Any = None) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    if where is not None:  # the mean of the selected elements (NaN where none is)
        s = _reduce(L, "sum", masked(L, x, where, 0.0), axes, keepdims, o)
        count = L.b.convert_to(L.operand(where, np.bool_, x.shape), o.dtype)
        return L.b.div(s, _reduce(L, "sum", count, axes, keepdims, o))
    s = _reduce(L, "sum", x, axes, keepdims, o)
    n = int(np.prod([x.shape[i] for i in axes]))
    return L.b.div(s, L.b.const(n, o.dtype, o.shape))


def _moment(sqrt: bool) -> Lower:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
              out: Any = None, ddof: int = 0, keepdims: bool = False, where: Any = None,
              mean: Any = None, correction: Any = None) -> Value:
        o = outs[0]
        x = L.operand(a, o.dtype, None)
        axes = norm_axes(axis, x.ndim)
        n = int(np.prod([x.shape[i] for i in axes]))
        kshape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        b = L.b
        m = b.div(b.reshape_to(b.sum(x, axes=axes), kshape), b.const(n, o.dtype, kshape))
        d = b.sub(x, b.broadcast_to(m, x.shape))
        ss = _reduce(L, "sum", b.mul(d, d), axes, keepdims, o)
        dof = max(n - (correction if correction is not None else ddof), 0)  # as NumPy
        v = b.div(ss, b.const(dof, o.dtype, o.shape))
        return safe_sqrt(L, v) if sqrt else v

    return lower


def safe_sqrt(L: LoweringContext, v: Value) -> Value:
    """``sqrt(v)`` whose gradient is 0 where ``v`` is 0 (the std of equal values, of one
    element): the subgradient at the minimum, not 0 * inf = NaN. The value is unchanged
    (sqrt(0) = 0); the square root never sees the zero, so no order of derivative does."""
    b = L.b
    zero = b.const(0.0, v.dtype, v.shape)
    at_zero = b.eq(v, zero)
    root = b.sqrt(b.select(at_zero, b.const(1.0, v.dtype, v.shape), v))
    return b.select(at_zero, zero, root)


register("var", np.var, np.var)(_moment(False))
register("std", np.std, np.std)(_moment(True))


def _argreduce(ir_name: str) -> Lower:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, out: Any = None,
              keepdims: bool = False) -> Value:
        o = outs[0]
        x = L.operand(a, None, None)
        if axis is None:
            x = L.b.reshape_to(x, (x.type.size,))
            axis = 0
        r = L.b.emit(ir_name, x, axis=norm_axes(axis, x.ndim)[0])
        return L.b.convert_to(L.b.reshape_to(r, o.shape), o.dtype)

    return lower


register("argmax", np.argmax, np.argmax)(_argreduce("argmax"))
register("argmin", np.argmin, np.argmin)(_argreduce("argmin"))
