"""Differences and NaN-aware statistics: ``diff`` (``n``, ``axis``, ``prepend``,
``append``), ``ediff1d``, ``gradient`` (uniform spacing, ``edge_order`` 1 or 2), ``ptp``,
``average`` (``weights``), ``nansum``, ``nanprod``, ``nanmean``, ``nanvar``, ``nanstd``,
``nanmax`` and ``nanmin``.

NaN-aware reductions replace NaNs by the operation's identity with a ``select`` (so no
gradient reaches them, as in JAX) and count the others for ``nanmean``.

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sum(np.diff(x) ** 2), np.array([0.0, 1.0, 3.0]))
    >>> g[0].tolist()
    [-2.0, -2.0, 4.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .axes import int_tuple, norm_axes
from .reductions import safe_sqrt
from .registry import LoweringContext, register

_NO = np._NoValue  # NumPy's marker for an argument that was not given


def _slice(L: LoweringContext, x: Value, axis: int, lo: int, hi: int) -> Value:
    start = tuple(lo if i == axis else 0 for i in range(x.ndim))
    stop = tuple(hi if i == axis else s for i, s in enumerate(x.shape))
    return L.b.emit("slice", x, start=start, stop=stop, step=(1,) * x.ndim)


def _edge(L: LoweringContext, v: Any, x: Value, axis: int) -> Value:
    """``prepend``/``append`` as NumPy takes it: a scalar is broadcast to one slice."""
    t = L.type_of(v)
    shape = list(x.shape)
    if t is None or t.ndim == 0:
        shape[axis] = 1
        return L.operand(v, x.dtype, tuple(shape))
    e = L.operand(v, x.dtype, None)
    return e if e.ndim == x.ndim else L.b.reshape_to(e, tuple(shape[:axis]) + (1,) + e.shape)


@register("diff", np.diff, np.diff)
def _diff(L: LoweringContext, outs: list[TensorType], a: Any, n: int = 1, axis: int = -1,
          prepend: Any = _NO, append: Any = _NO) -> Value:
    o = outs[0]
    x = L.operand(a, None, None)
    ax = norm_axes(axis, x.ndim)[0]
    parts = ([_edge(L, prepend, x, ax)] if prepend is not _NO else []) + [x] + (
        [_edge(L, append, x, ax)] if append is not _NO else [])
    dt = np.result_type(*[p.dtype for p in parts])
    parts = [L.b.convert_to(p, dt) for p in parts]
    x = parts[0] if len(parts) == 1 else L.b.emit("concatenate", *parts, axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        hi, lo = _slice(L, x, ax, min(1, m), m), _slice(L, x, ax, 0, max(m - 1, 0))
        x = L.b.emit("ne", hi, lo) if x.dtype.kind == "b" else L.b.emit("sub", hi, lo)
    return L.b.convert_to(x, o.dtype)


@register("ediff1d", np.ediff1d, np.ediff1d)
def _ediff1d(L: LoweringContext, outs: list[TensorType], ary: Any, to_end: Any = None,
             to_begin: Any = None) -> Value:
    o = outs[0]
    x = L.operand(ary, o.dtype, None)
    x = L.b.reshape_to(x, (x.type.size,))
    d = L.b.emit("sub", _slice(L, x, 0, 1, x.shape[0]), _slice(L, x, 0, 0, max(x.shape[0] - 1, 0)))
    parts = []
    for extra, first in ((to_begin, True), (to_end, False)):
        if extra is None:
            continue
        e = L.operand(extra, o.dtype, None)
        e = L.b.reshape_to(e, (e.type.size,))
        parts.append((first, e))
    seq = [e for f, e in parts if f] + [d] + [e for f, e in parts if not f]
    return seq[0] if len(seq) == 1 else L.b.emit("concatenate", *seq, axis=0)


@register("ptp", np.ptp, np.ptp)
def _ptp(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None, out: Any = None,
         keepdims: bool = False) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    r = L.b.emit("sub", L.b.emit("max", x, axes=axes), L.b.emit("min", x, axes=axes))
    return L.b.reshape_to(r, o.shape)


@register("average", np.average, np.average)
def _average(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
             weights: Any = None, returned: bool = False, *, keepdims: bool = False) -> Any:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    if weights is None:
        n = int(np.prod([x.shape[i] for i in axes]))
        total = L.b.emit("sum", x, axes=axes)
        avg = L.b.emit("div", total, L.b.const(float(n), o.dtype, total.shape))
        wsum = L.b.const(float(n), o.dtype, total.shape)
    else:
        w = _weights(L, weights, x, axes, o.dtype)
        wsum = L.b.emit("sum", w, axes=axes)
        avg = L.b.emit("div", L.b.emit("sum", L.b.emit("mul", x, w), axes=axes), wsum)
    avg = L.b.reshape_to(avg, outs[0].shape)
    if not returned:
        return avg
    return [avg, L.b.reshape_to(L.b.broadcast_to(wsum, avg.shape) if wsum.shape != avg.shape
                                else wsum, outs[1].shape)]


def _weights(L: LoweringContext, weights: Any, x: Value, axes: tuple[int, ...],
             dtype: Any) -> Value:
    """Weights of x's shape, or 1-d along the one reduced axis (NumPy's two forms)."""
    w = L.operand(weights, dtype, None)
    if w.shape != x.shape:  # (a plain list too)
        (ax,) = axes
        w = L.b.reshape_to(w, tuple(s if i == ax else 1 for i, s in enumerate(x.shape)))
    return L.b.broadcast_to(w, x.shape)


def _nan_reduction(ir_name: str, identity: float) -> Any:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
              dtype: Any = None, out: Any = None, keepdims: bool = False) -> Value:
        o = outs[0]
        x = L.operand(a, o.dtype, None)
        axes = norm_axes(axis, x.ndim)
        if x.dtype.kind == "f":
            x = L.b.emit("select", L.b.emit("isnan", x), L.b.const(identity, x.dtype, x.shape), x)
        return L.b.reshape_to(L.b.emit(ir_name, x, axes=axes), o.shape)

    return lower


register("nansum", np.nansum, np.nansum)(_nan_reduction("sum", 0.0))
register("nanprod", np.nanprod, np.nanprod)(_nan_reduction("prod", 1.0))


def _nan_extreme(ir_name: str, identity: float) -> Any:
    """nanmax/nanmin: NaNs lose; a slice of only NaNs gives NaN (NumPy warns)."""
    base = _nan_reduction(ir_name, identity)

    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
              out: Any = None, keepdims: bool = False, initial: Any = _NO,
              where: Any = _NO) -> Value:
        o = outs[0]
        r = base(L, outs, a, axis, keepdims=keepdims)
        x = L.operand(a, o.dtype, None)
        if x.dtype.kind != "f":
            return r
        allnan = L.b.emit("min", L.b.emit("isnan", x), axes=norm_axes(axis, x.ndim))
        return L.b.emit("select", L.b.reshape_to(allnan, o.shape),
                        L.b.const(np.nan, o.dtype, o.shape), r)

    return lower


register("nanmax", np.nanmax, np.nanmax)(_nan_extreme("max", -np.inf))
register("nanmin", np.nanmin, np.nanmin)(_nan_extreme("min", np.inf))


@register("nanmean", np.nanmean, np.nanmean)
def _nanmean(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
             dtype: Any = None, out: Any = None, keepdims: bool = False) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    nan = L.b.emit("isnan", x)
    total = L.b.emit("sum", L.b.emit("select", nan, L.b.const(0.0, x.dtype, x.shape), x),
                     axes=axes)
    count = L.b.emit("sum", L.b.convert_to(L.b.emit("not", nan), x.dtype), axes=axes)
    return L.b.reshape_to(L.b.emit("div", total, count), o.shape)  # 0/0: NaN, as NumPy


def _nanmoment(sqrt: bool) -> Any:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
              dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
              *, mean: Any = None, correction: Any = None) -> Value:
        """The variance of the non-NaN elements (NaN where fewer than ddof + 1 remain)."""
        o = outs[0]
        b = L.b
        x = L.operand(a, o.dtype, None)
        axes = norm_axes(axis, x.ndim)
        keep = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        ok = b.emit("not", b.emit("isnan", x))
        zero = b.const(0.0, x.dtype, x.shape)
        count = b.emit("sum", b.convert_to(ok, x.dtype), axes=axes)
        total = b.emit("sum", b.emit("select", ok, x, zero), axes=axes)
        m = b.broadcast_to(b.reshape_to(b.emit("div", total, count), keep), x.shape)
        d = b.emit("select", ok, b.emit("sub", x, m), zero)
        dof = b.emit("sub", count, b.const(float(correction if correction is not None
                                                 else ddof), x.dtype, count.shape))
        v = b.emit("div", b.emit("sum", b.emit("mul", d, d), axes=axes), dof)
        if sqrt:
            v = safe_sqrt(L, v)
        return b.reshape_to(v, o.shape)

    return lower


register("nanvar", np.nanvar, np.nanvar)(_nanmoment(False))
register("nanstd", np.nanstd, np.nanstd)(_nanmoment(True))


@register("gradient", np.gradient, np.gradient)
def _gradient(L: LoweringContext, outs: list[TensorType], f: Any, *varargs: Any,
              axis: Any = None, edge_order: int = 1) -> Any:
    """NumPy's second-order central differences inside, first- or second-order one-sided
    ones at the edges, for uniform spacings (scalars); one result per axis."""
    x = L.operand(f, outs[0].dtype, None)
    axes = list(range(x.ndim)) if axis is None else list(int_tuple(axis))
    axes = [a % x.ndim for a in axes]
    spacing = _spacings(L, varargs, len(axes))
    if edge_order not in (1, 2):
        raise UnsupportedError("np.gradient: edge_order must be 1 or 2")
    res = [_gradient_along(L, x, ax, h, edge_order, o) for ax, h, o in zip(axes, spacing, outs,
                                                                         strict=True)]
    return res


def _spacings(L: LoweringContext, varargs: tuple[Any, ...], n: int) -> list[float]:
    if any(L.is_traced(v) or np.ndim(v) != 0 for v in varargs):
        raise UnsupportedError("np.gradient: only uniform spacings given as Python numbers are "
                               "supported (no coordinate arrays, no traced spacing)")
    hs = [float(v) for v in varargs] or [1.0]
    if len(hs) == 1:
        hs = hs * n
    if len(hs) != n:
        raise UnsupportedError(f"np.gradient: {len(hs)} spacings for {n} axes")
    return hs


def _gradient_along(L: LoweringContext, x: Value, ax: int, h: float, edge_order: int,
                    o: TensorType) -> Value:
    b = L.b
    n = x.shape[ax]
    if n < edge_order + 1:
        raise UnsupportedError(f"np.gradient: an axis of length {n} needs at least "
                               f"{edge_order + 1} points")
    s = lambda lo, hi: _slice(L, x, ax, lo, hi)  # noqa: E731
    c = lambda v, like: b.const(v, x.dtype, like.shape)  # noqa: E731
    inner = b.emit("div", b.emit("sub", s(2, n), s(0, n - 2)), c(2.0 * h, s(2, n)))
    if edge_order == 1:
        first = b.emit("div", b.emit("sub", s(1, 2), s(0, 1)), c(h, s(0, 1)))
        last = b.emit("div", b.emit("sub", s(n - 1, n), s(n - 2, n - 1)), c(h, s(0, 1)))
    else:  # (-3 f0 + 4 f1 - f2) / 2h, and its mirror
        def combo(a0: int, a1: int, a2: int, sign: float) -> Value:
            t = b.emit("add", b.emit("mul", s(a0, a0 + 1), c(-3.0 * sign, s(0, 1))),
                       b.emit("mul", s(a1, a1 + 1), c(4.0 * sign, s(0, 1))))
            t = b.emit("sub", t, b.emit("mul", s(a2, a2 + 1), c(sign, s(0, 1))))
            return b.emit("div", t, c(2.0 * h, s(0, 1)))

        first, last = combo(0, 1, 2, 1.0), combo(n - 1, n - 2, n - 3, -1.0)
    parts = [first, inner, last] if n > 2 else [first, last]
    return b.convert_to(b.emit("concatenate", *parts, axis=ax), o.dtype)
