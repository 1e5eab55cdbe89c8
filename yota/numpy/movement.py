"""Data movement: ``pad`` (the modes that move data; ``padding`` computes the others),
``repeat``, ``tile``, ``roll``, ``flip``/``fliplr``/``flipud``,
``rot90``, ``rollaxis``, ``tril``/``triu``, ``diag``/``diagflat``/``diagonal``/``trace``,
``take``/``take_along_axis``, ``delete``, ``insert``, ``resize``, ``compress``, ``select``
and ``choose``.

Each lowers to ops every backend already runs, with a derivative rule each:

=================== ===============================================================
``pad``             ``pad`` (zeros), ``concatenate`` of constant blocks, or one
                    ``gather`` per axis with NumPy's own index pattern
                    (``np.pad(np.arange(n), w, mode)``: edge, reflect, symmetric, wrap)
``repeat``          ``broadcast`` + ``reshape`` (one count), ``gather`` (counts)
``tile``            ``broadcast`` + ``reshape``
``roll``            two ``slice`` + ``concatenate`` per axis (a traced shift:
                    ``gather`` of ``(arange(n) - shift) % n``)
``flip`` & co.      ``flip`` (and ``transpose`` for ``rot90``/``rollaxis``)
``tril``/``triu``   ``select`` with a constant mask
``diag``            ``pad`` + ``broadcast`` + ``select`` (vector → matrix), ``gather``
``diagonal``        ``transpose`` + ``gather`` (``trace``: and ``sum``)
``take*``           ``gather`` (``mode='wrap'/'clip'``: ``mod``/``clip`` of the indices)
``delete``          ``gather`` of the kept indices
``insert`` & co.    one ``gather`` whose indices NumPy computes by running the function
                    on element ids (``by_ids``): ``insert``, ``resize``, ``compress``
``select``/``choose`` nested ``select``
=================== ===============================================================

Counts, widths and axes decide the result's shape, so they must be constants of the
trace (``static.static_value``); indices and a single ``roll`` shift may be traced.
``put_along_axis`` writes into its argument: refused with an error that says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.ops import iota
from yota.ir.types import I64, TensorType

from ..userloc import where
from .joining import slice_axis
from .registry import LoweringContext, register
from .static import normalize_axis, operand_along, static_value


def _transpose(L: LoweringContext, x: Value, perm: list[int] | tuple[int, ...]) -> Value:
    return x if tuple(perm) == tuple(range(x.ndim)) else L.b.transpose(x, perm=tuple(perm))


def _gather1(L: LoweringContext, x: Value, idx: np.ndarray, ax: int) -> Value:
    """``x`` indexed by the constant integer array ``idx`` along axis ``ax``."""
    if idx.ndim == 1 and idx.size == x.shape[ax] and np.array_equal(idx, np.arange(idx.size)):
        return x
    return L.b.gather(x, L.b.const(np.asarray(idx, np.int64)), axis=ax)


def _flat(L: LoweringContext, x: Value) -> Value:
    return L.b.reshape_to(x, (x.type.size,))


# -- pad --------------------------------------------------------------------------------------
_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def _pad_forward(array: Any, pad_width: Any, mode: Any = "constant", **kw: Any) -> Any:
    return np.pad(array, pad_width, mode, **kw)


@register("pad", _pad_forward, np.pad)
def _pad(L: LoweringContext, outs: list[TensorType], array: Any, pad_width: Any,
         mode: Any = "constant", **kwargs: Any) -> Value:
    o = outs[0]
    x = L.operand(array, o.dtype, None)
    if isinstance(pad_width, dict):
        raise UnsupportedError("np.pad with a dict of widths is not supported; give a "
                               "sequence of (before, after) pairs")
    widths = np.broadcast_to(np.asarray(static_value(L, pad_width, "np.pad's pad_width"),
                                        np.int64), (x.ndim, 2))
    if mode in ("constant", "empty"):
        return _pad_constant(L, x, widths, kwargs.get("constant_values", 0), o)
    if mode not in _INDEX_MODES or callable(mode):
        raise UnsupportedError(f"np.pad(..., mode={mode!r}) is not supported; Yota traces "
                               "NumPy's named modes")
    if kwargs.get("reflect_type", "even") != "even":  # (yota.numpy.padding's)
        raise UnsupportedError("np.pad(..., reflect_type='odd') is not supported here")
    for ax, (lo, hi) in enumerate(widths):
        if lo or hi:
            idx = np.pad(np.arange(x.shape[ax]), (int(lo), int(hi)), mode)
            x = _gather1(L, x, idx, ax)
    return x


def _pad_constant(L: LoweringContext, x: Value, widths: np.ndarray, values: Any,
                  o: TensorType) -> Value:
    vt = L.type_of(values) if L.is_traced(values) else None
    if vt is not None and vt.ndim == 0:  # a traced fill value
        v = L.operand(values, o.dtype, None)
        return _pad_blocks(L, x, widths, lambda ax, side, shape: L.b.broadcast_to(v, shape), o)
    if x.ndim == 0:
        return x
    try:
        static = static_value(L, values, "np.pad's constant_values")
    except UnsupportedError:  # computed from the inputs: one traced value per block
        v = L.b.broadcast_to(L.operand(values, o.dtype, None), (x.ndim, 2))

        def block(ax: int, side: int, shape: tuple[int, ...]) -> Value:
            e = L.b.slice(v, start=(ax, side), stop=(ax + 1, side + 1), step=(1, 1))
            return L.b.broadcast_to(L.b.reshape_to(e, ()), shape)

        return _pad_blocks(L, x, widths, block, o)
    cv = np.broadcast_to(np.asarray(static), (x.ndim, 2)).astype(o.dtype)
    if not cv.any():
        return L.b.pad(x, low=tuple(int(w) for w in widths[:, 0]),
                       high=tuple(int(w) for w in widths[:, 1]), interior=(0,) * x.ndim)
    return _pad_blocks(L, x, widths, lambda ax, side, shape: L.b.const(cv[ax, side], o.dtype,
                                                                       shape), o)


def _pad_blocks(L: LoweringContext, x: Value, widths: np.ndarray, block: Any,
                o: TensorType) -> Value:
    """Axis by axis (as NumPy fills them), a block of ``block(ax, side, shape)`` each side."""
    for ax, (lo, hi) in enumerate(widths):
        parts = []
        for side, w in ((0, int(lo)), (1, int(hi))):
            shape = x.shape[:ax] + (w,) + x.shape[ax + 1:]
            parts.append(block(ax, side, shape) if w else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(pieces) > 1:
            x = L.b.concatenate(*pieces, axis=ax)
    return L.b.reshape_to(x, o.shape)


# -- repeat, tile, roll -------------------------------------------------------------------------
@register("repeat", np.repeat, np.repeat)
def _repeat(L: LoweringContext, outs: list[TensorType], a: Any, repeats: Any,
            axis: Any = None) -> Value:
    o = outs[0]
    x, ax = operand_along(L, a, axis, o.dtype, "np.repeat")
    r = np.asarray(static_value(L, repeats, "np.repeat's repeats"), np.int64)
    if r.size == 1:
        n = int(r.reshape(()))
        y = L.b.reshape_to(x, x.shape[:ax + 1] + (1,) + x.shape[ax + 1:])
        y = L.b.broadcast_to(y, x.shape[:ax + 1] + (n,) + x.shape[ax + 1:])
        return L.b.reshape_to(y, o.shape)
    return L.b.reshape_to(_gather1(L, x, np.repeat(np.arange(x.shape[ax]), r), ax), o.shape)


@register("tile", np.tile, np.tile)
def _tile(L: LoweringContext, outs: list[TensorType], A: Any, reps: Any) -> Value:
    o = outs[0]
    x = L.operand(A, o.dtype, None)
    r = tuple(int(v) for v in np.atleast_1d(static_value(L, reps, "np.tile's reps")))
    d = max(x.ndim, len(r))
    shape = (1,) * (d - x.ndim) + x.shape
    r = (1,) * (d - len(r)) + r
    inter = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for s, n in zip(shape, r, strict=True) for v in (n, s))
    return L.b.reshape_to(L.b.broadcast_to(L.b.reshape_to(x, inter), wide), o.shape)


@register("roll", np.roll, np.roll)
def _roll(L: LoweringContext, outs: list[TensorType], a: Any, shift: Any,
          axis: Any = None) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    st = L.type_of(shift) if L.is_traced(shift) else None
    if st is not None and st.ndim == 0 and (axis is None or np.ndim(axis) == 0):
        flat = axis is None
        y = _flat(L, x) if flat else x
        ax = 0 if flat else normalize_axis(axis, x.ndim, "np.roll")
        return L.b.reshape_to(_roll_traced(L, y, ax, L.operand(shift, None, None)), o.shape)
    s = static_value(L, shift, "np.roll's shift", "a tuple of shifts must be constants")
    if axis is None:
        return L.b.reshape_to(_roll_axis(L, _flat(L, x), 0, int(np.sum(s))), o.shape)
    total = [0] * x.ndim
    for sh, ax in np.broadcast(s, axis):
        total[normalize_axis(ax, x.ndim, "np.roll")] += int(sh)
    for ax, sh in enumerate(total):
        x = _roll_axis(L, x, ax, sh)
    return x


def _roll_traced(L: LoweringContext, x: Value, ax: int, shift: Value) -> Value:
    """``np.roll`` by a traced shift: a gather of ``(arange(n) - shift) % n``."""
    n = x.shape[ax]
    if n == 0:
        return x
    s = L.b.broadcast_to(L.b.convert_to(shift, I64), (n,))
    idx = L.b.sub(iota.arange(L.b, (n,), 0, I64), s)
    return L.b.gather(x, L.b.mod(idx, L.b.const(n, I64, (n,))), axis=ax)


def _roll_axis(L: LoweringContext, x: Value, ax: int, shift: int) -> Value:
    n = x.shape[ax]
    k = shift % n if n else 0
    if not k:
        return x
    return L.b.concatenate(slice_axis(L, x, ax, n - k, n), slice_axis(L, x, ax, 0, n - k),
                           axis=ax)


# -- flips and rotations --------------------------------------------------------------------------
def _flip_axes(L: LoweringContext, x: Value, axes: tuple[int, ...]) -> Value:
    axes = tuple(sorted({a for a in axes if x.shape[a] > 1}))
    return L.b.flip(x, axes=axes) if axes else x


@register("flip", np.flip, np.flip)
def _flip(L: LoweringContext, outs: list[TensorType], m: Any, axis: Any = None) -> Value:
    x = L.operand(m, None, None)
    axes = range(x.ndim) if axis is None else np.atleast_1d(axis)
    return _flip_axes(L, x, tuple(normalize_axis(a, x.ndim, "np.flip") for a in axes))


register("fliplr", np.fliplr, np.fliplr)(
    lambda L, outs, m: _flip_axes(L, L.operand(m, None, None), (1,)))
register("flipud", np.flipud, np.flipud)(
    lambda L, outs, m: _flip_axes(L, L.operand(m, None, None), (0,)))


@register("rot90", np.rot90, np.rot90)
def _rot90(L: LoweringContext, outs: list[TensorType], m: Any, k: int = 1,
           axes: Any = (0, 1)) -> Value:
    x = L.operand(m, None, None)
    a0, a1 = (normalize_axis(a, x.ndim, "np.rot90") for a in axes)
    k = int(static_value(L, k, "np.rot90's k")) % 4
    if k == 2:
        return _flip_axes(L, x, (a0, a1))
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return _transpose(L, _flip_axes(L, x, (a1,)), perm)
    if k == 3:
        return _flip_axes(L, _transpose(L, x, perm), (a1,))
    return x


@register("rollaxis", np.rollaxis, np.rollaxis)
def _rollaxis(L: LoweringContext, outs: list[TensorType], a: Any, axis: int,
              start: int = 0) -> Value:
    x = L.operand(a, None, None)
    n = x.ndim
    ax = normalize_axis(axis, n, "np.rollaxis")
    st = start + n if start < 0 else start
    if ax < st:
        st -= 1
    perm = [i for i in range(n) if i != ax]
    perm.insert(st, ax)
    return _transpose(L, x, perm)


# -- triangles and diagonals ----------------------------------------------------------------------
def _masked(L: LoweringContext, x: Value, mask: np.ndarray | Value, o: TensorType) -> Value:
    """``np.where(mask, x, 0)`` with ``mask`` (a constant or a bool value) broadcast to ``o``."""
    m = L.b.const(mask) if isinstance(mask, np.ndarray) else mask
    m = L.b.broadcast_to(m, o.shape)
    return L.b.select(m, L.b.broadcast_to(x, o.shape), L.b.const(0, o.dtype, o.shape))


def _triangle(L: LoweringContext, k: Any, o: TensorType, lower: bool) -> Value:
    """The mask of ``tril`` (``lower``) or ``triu`` for diagonal ``k``; a traced ``k``
    compares it with ``column - row`` of each element."""
    n, c = o.shape[-2:]
    if L.is_traced(k) and not isinstance(k, (int, np.integer)):
        kv = L.b.broadcast_to(L.b.convert_to(L.operand(k, None, None), I64), (n, c))
        offs = iota.col_minus_row(L.b, (n, c))
        return L.b.le(offs, kv) if lower else L.b.ge(offs, kv)
    k = int(static_value(L, k, "k"))
    return iota.tri(L.b, (n, c), k, np.bool_, upper=not lower)


@register("tril", np.tril, np.tril)
def _tril(L: LoweringContext, outs: list[TensorType], m: Any, k: Any = 0) -> Value:
    o = outs[0]
    return _masked(L, L.operand(m, o.dtype, None), _triangle(L, k, o, True), o)


@register("triu", np.triu, np.triu)
def _triu(L: LoweringContext, outs: list[TensorType], m: Any, k: Any = 0) -> Value:
    o = outs[0]
    return _masked(L, L.operand(m, o.dtype, None), _triangle(L, k, o, False), o)


def _offset(L: LoweringContext, k: Any, fname: str) -> int:
    return int(static_value(L, k, f"{fname}'s offset", "it decides the result's length"))


def diagonal_of(L: LoweringContext, x: Value, offset: int, axis1: int, axis2: int) -> Value:
    """``np.diagonal(x, offset, axis1, axis2)``: the two axes replaced by one at the end."""
    a1 = normalize_axis(axis1, x.ndim, "np.diagonal")
    a2 = normalize_axis(axis2, x.ndim, "np.diagonal")
    if a1 == a2:
        raise UnsupportedError("np.diagonal: axis1 and axis2 cannot be the same")
    x = _transpose(L, x, [i for i in range(x.ndim) if i not in (a1, a2)] + [a1, a2])
    n, m = x.shape[-2:]
    d = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    i = iota.arange(L.b, (d,), 0, I64, max(-offset, 0))
    j = iota.arange(L.b, (d,), 0, I64, max(offset, 0))
    return L.b.gather(x, i, j, axis=x.ndim - 2)


@register("diagonal", np.diagonal, np.diagonal)
def _diagonal(L: LoweringContext, outs: list[TensorType], a: Any, offset: int = 0,
              axis1: int = 0, axis2: int = 1) -> Value:
    return diagonal_of(L, L.operand(a, outs[0].dtype, None), _offset(L, offset, "np.diagonal"),
                       axis1, axis2)


@register("trace", np.trace, np.trace)
def _trace(L: LoweringContext, outs: list[TensorType], a: Any, offset: int = 0, axis1: int = 0,
           axis2: int = 1, dtype: Any = None, out: Any = None) -> Value:
    o = outs[0]
    d = diagonal_of(L, L.operand(a, None, None), _offset(L, offset, "np.trace"), axis1, axis2)
    d = L.b.convert_to(d, o.dtype)
    return L.b.sum(d, axes=(d.ndim - 1,))


@register("linalg.diagonal", np.linalg.diagonal, np.linalg.diagonal)
def _linalg_diagonal(L: LoweringContext, outs: list[TensorType], x: Any, *,
                     offset: Any = 0) -> Value:
    k = _offset(L, offset, "np.linalg.diagonal")
    return diagonal_of(L, L.operand(x, None, None), k, -2, -1)



register("linalg.trace", np.linalg.trace, np.linalg.trace)(
    lambda L, outs, x, *, offset=0, dtype=None: _trace(L, outs, x, offset, -2, -1))


def _diag_matrix(L: LoweringContext, v: Value, k: int, o: TensorType) -> Value:
    """The matrix with vector ``v`` on its ``k``-th diagonal."""
    n = o.shape[0]
    col = L.b.pad(v, low=(0,), high=(n - v.shape[0],), interior=(0,))
    col = L.b.reshape_to(col, (n, 1) if k >= 0 else (1, n))
    return _masked(L, col, iota.eye(L.b, (n, n), k, np.bool_), o)


@register("diag", np.diag, np.diag)
def _diag(L: LoweringContext, outs: list[TensorType], v: Any, k: int = 0) -> Value:
    o = outs[0]
    x = L.operand(v, o.dtype, None)
    if x.ndim == 1:
        return _diag_matrix(L, x, _offset(L, k, "np.diag"), o)
    return diagonal_of(L, x, _offset(L, k, "np.diag"), 0, 1)


@register("diagflat", np.diagflat, np.diagflat)
def _diagflat(L: LoweringContext, outs: list[TensorType], v: Any, k: int = 0) -> Value:
    o = outs[0]
    return _diag_matrix(L, _flat(L, L.operand(v, o.dtype, None)), _offset(L, k, "np.diagflat"), o)


@register("delete", np.delete, np.delete)
def _delete(L: LoweringContext, outs: list[TensorType], arr: Any, obj: Any,
            axis: Any = None) -> Value:
    o = outs[0]
    x, ax = operand_along(L, arr, axis, o.dtype, "np.delete")
    drop = static_value(L, obj, "np.delete's obj")
    kept = np.delete(np.arange(x.shape[ax]), drop)
    return L.b.reshape_to(_gather1(L, x, kept, ax), o.shape)


def by_ids(L: LoweringContext, xs: list[Value], o: TensorType,
           move: Any) -> Value:
    """A function that only moves elements, applied by NumPy to element ids: ``move(*ids)``
    (``ids[i]`` numbers the elements of ``xs[i]``, after those of ``xs[:i]``) says which
    element each result element is, and one ``gather`` from all of them builds it."""
    ids, start = [], 0
    for x in xs:
        ids.append(np.arange(start, start + x.type.size, dtype=np.int64).reshape(x.shape))
        start += x.type.size
    where_from = np.asarray(move(*ids), np.int64)
    flat = [L.b.reshape_to(L.b.convert_to(x, o.dtype), (x.type.size,)) for x in xs]
    src = flat[0] if len(flat) == 1 else L.b.concatenate(*flat, axis=0)
    return L.b.reshape_to(L.b.gather(src, L.b.const(where_from), axis=0), o.shape)


@register("insert", np.insert, np.insert)
def _insert(L: LoweringContext, outs: list[TensorType], arr: Any, obj: Any, values: Any,
            axis: Any = None) -> Value:
    o = outs[0]
    where_ = static_value(L, obj, "np.insert's obj")
    xs = [L.operand(arr, o.dtype, None), L.operand(values, o.dtype, None)]
    return by_ids(L, xs, o, lambda a, v: np.insert(a, where_, v, axis=axis))


@register("resize", np.resize, np.resize)
def _resize(L: LoweringContext, outs: list[TensorType], a: Any, new_shape: Any) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    if x.type.size == 0 or o.size == 0:
        return L.b.const(0, o.dtype, o.shape)
    return by_ids(L, [x], o, lambda i: np.resize(i, new_shape))


@register("compress", np.compress, np.compress)
def _compress(L: LoweringContext, outs: list[TensorType], condition: Any, a: Any,
              axis: Any = None, out: Any = None) -> Value:
    o = outs[0]
    cond = static_value(L, condition, "np.compress's condition",
                        "it decides the result's shape (use np.where to keep the shape)")
    return by_ids(L, [L.operand(a, o.dtype, None)], o, lambda i: np.compress(cond, i, axis))


def _put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> Any:
    raise UnsupportedError(
        f"np.put_along_axis at {where()} writes into its first argument, and writes into "
        "traced arrays are not traced yet: build the result instead, e.g. "
        "np.where(np.arange(n) == indices, values, arr) along the axis")


register("put_along_axis", _put_along_axis, np.put_along_axis)(
    lambda L, outs, arr, indices, values, axis: None)


# -- take, take_along_axis, select, choose --------------------------------------------------------
def _indices(L: LoweringContext, indices: Any, n: int, mode: str) -> Value:
    """Integer indices as an i64 IR value, wrapped or clipped into ``[0, n)`` per ``mode``."""
    idx = L.b.convert_to(L.operand(indices, None, None), I64)
    if mode == "wrap":
        return L.b.mod(idx, L.b.const(n, I64, idx.shape))
    if mode == "clip":
        idx = L.b.maximum(idx, L.b.const(0, I64, idx.shape))
        return L.b.minimum(idx, L.b.const(n - 1, I64, idx.shape))
    if mode != "raise":
        raise UnsupportedError(f"mode={mode!r}: NumPy takes 'raise', 'wrap' or 'clip'")
    return idx


@register("take", np.take, np.take)
def _take(L: LoweringContext, outs: list[TensorType], a: Any, indices: Any, axis: Any = None,
          out: Any = None, mode: str = "raise") -> Value:
    o = outs[0]
    x, ax = operand_along(L, a, axis, o.dtype, "np.take")
    return L.b.reshape_to(L.b.gather(x, _indices(L, indices, x.shape[ax], mode), axis=ax),
                          o.shape)


@register("take_along_axis", np.take_along_axis, np.take_along_axis)
def _take_along_axis(L: LoweringContext, outs: list[TensorType], arr: Any, indices: Any,
                     axis: Any = -1) -> Value:
    o = outs[0]
    x, ax = operand_along(L, arr, axis, o.dtype, "np.take_along_axis")
    idx = []
    for d in range(x.ndim):
        if d == ax:
            i = _indices(L, indices, x.shape[d], "raise")
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            i = iota.arange(L.b, tuple(shape), d, I64)
        idx.append(L.b.broadcast_to(i, o.shape))
    return L.b.gather(x, *idx, axis=0)


@register("select", np.select, np.select)
def _select(L: LoweringContext, outs: list[TensorType], condlist: Any, choicelist: Any,
            default: Any = 0) -> Value:
    o = outs[0]
    res = L.operand(default, o.dtype, o.shape)
    for c, v in reversed(list(zip(condlist, choicelist, strict=True))):
        cond = L.b.broadcast_to(L.operand(c, None, None), o.shape)
        res = L.b.select(cond, L.operand(v, o.dtype, o.shape), res)
    return res


@register("choose", np.choose, np.choose)
def _choose(L: LoweringContext, outs: list[TensorType], a: Any, choices: Any, out: Any = None,
            mode: str = "raise") -> Value:
    o = outs[0]
    if L.is_traced(choices):
        c = L.operand(choices, o.dtype, None)
        opts = [L.b.reshape_to(slice_axis(L, c, 0, k, k + 1), c.shape[1:])
                for k in range(c.shape[0])]
    else:
        opts = [L.operand(v, o.dtype, None) for v in choices]
    idx = L.b.broadcast_to(_indices(L, a, len(opts), mode), o.shape)
    res = L.b.broadcast_to(opts[0], o.shape)
    for k, v in enumerate(opts[1:], start=1):
        hit = L.b.eq(idx, L.b.const(k, I64, o.shape))
        res = L.b.select(hit, L.b.broadcast_to(v, o.shape), res)
    return res

