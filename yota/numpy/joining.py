"""Joining and splitting: ``concatenate``, ``stack`` and its variants (``vstack``,
``hstack``, ``dstack``, ``column_stack``, ``row_stack``), ``block``, ``append``, ``split`` and its
variants (``array_split``, ``hsplit``, ``vsplit``, ``dsplit``), ``atleast_1d/2d/3d``,
``broadcast_arrays`` and ``meshgrid``.

Everything lowers to ``reshape``, ``broadcast``, ``concatenate`` and ``slice``: the
result shapes NumPy computed while tracing say where each piece goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .registry import LoweringContext, register
from .static import normalize_axis


def join(L: LoweringContext, xs: list[Value], axis: int, out: TensorType) -> Value:
    """``np.concatenate(xs, axis)`` of IR values (empty pieces dropped), as type ``out``."""
    xs = [L.b.convert_to(x, out.dtype) for x in xs]
    kept = [x for x in xs if x.shape[axis] > 0] or xs[:1]
    if len(kept) == 1:
        return L.b.reshape_to(kept[0], out.shape)
    return L.b.concatenate(*kept, axis=axis)


@register("concatenate", np.concatenate, np.concatenate)
def _concatenate(L: LoweringContext, outs: list[TensorType], arrays: Any, axis: Any = 0,
                 out: Any = None, dtype: Any = None, casting: Any = None) -> Value:
    o = outs[0]
    xs = _rows(L, arrays, o) if L.is_traced(arrays) else \
        [L.operand(a, o.dtype, None) for a in arrays]  # (one array: its rows, as NumPy)
    if axis is None:
        xs = [L.b.reshape_to(x, (x.type.size,)) for x in xs]
        axis = 0
    return join(L, xs, normalize_axis(axis, o.ndim, "np.concatenate"), o)


@register("concat", np.concat, np.concat)
def _concat(L: LoweringContext, outs: list[TensorType], arrays: Any, axis: Any = 0,
            out: Any = None, *, dtype: Any = None, casting: Any = None) -> Value:
    return _concatenate(L, outs, arrays, axis)


def _pieces(L: LoweringContext, arrays: Any, o: TensorType,
            shape_of: Callable[[tuple[int, ...]], tuple[int, ...]]) -> list[Value]:
    """Each array as an IR value of ``o``'s dtype, reshaped to ``shape_of(its shape)``."""
    xs = _rows(L, arrays, o) if L.is_traced(arrays) else \
        [L.operand(a, o.dtype, None) for a in arrays]
    return [L.b.reshape_to(x, shape_of(x.shape)) for x in xs]


def _rows(L: LoweringContext, array: Any, o: TensorType) -> list[Value]:
    """One traced array given where NumPy takes a sequence (``np.vstack(x)``): its rows,
    as NumPy iterates it."""
    x = L.operand(array, o.dtype, None)
    n, rest = x.shape[0], x.shape[1:]
    one = (1,) * x.ndim
    return [L.b.reshape_to(L.b.slice(x, start=(i,) + (0,) * len(rest),
                                     stop=(i + 1,) + rest, step=one), rest)
            for i in range(n)]


def _atleast(n: int) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    fn = {1: np.atleast_1d, 2: np.atleast_2d, 3: np.atleast_3d}[n]
    return lambda shape: np.shape(fn(np.broadcast_to(np.zeros(()), shape)))


@register("stack", np.stack, np.stack)
def _stack(L: LoweringContext, outs: list[TensorType], arrays: Any, axis: int = 0,
           out: Any = None, dtype: Any = None, casting: Any = None) -> Value:
    o = outs[0]
    ax = normalize_axis(axis, o.ndim, "np.stack")
    xs = _pieces(L, arrays, o, lambda s: s[:ax] + (1,) + s[ax:])
    return join(L, xs, ax, o)


def _stacker(name: str, fn: Callable[..., Any], n: int, axis: Callable[[int], int]) -> None:
    """``np.<name>(tup)``: each array made at least ``n``-d, joined on ``axis(ndim)``."""

    def lower(L: LoweringContext, outs: list[TensorType], tup: Any, *, dtype: Any = None,
              casting: Any = None) -> Value:
        o = outs[0]
        return join(L, _pieces(L, tup, o, _atleast(n)), axis(o.ndim), o)

    register(name, fn, fn)(lower)


_stacker("vstack", np.vstack, 2, lambda nd: 0)
_stacker("hstack", np.hstack, 1, lambda nd: 0 if nd == 1 else 1)
_stacker("dstack", np.dstack, 3, lambda nd: 2)
# np.row_stack (deprecated in NumPy 2.0) calls np.vstack, which is traced


@register("column_stack", np.column_stack, np.column_stack)
def _column_stack(L: LoweringContext, outs: list[TensorType], tup: Any) -> Value:
    o = outs[0]
    xs = _pieces(L, tup, o, lambda s: (int(np.prod(s)), 1) if len(s) < 2 else s)
    return join(L, xs, 1, o)


@register("append", np.append, np.append)
def _append(L: LoweringContext, outs: list[TensorType], arr: Any, values: Any,
            axis: Any = None) -> Value:
    o = outs[0]
    xs = [L.operand(a, o.dtype, None) for a in (arr, values)]
    if axis is None:
        return join(L, [L.b.reshape_to(x, (x.type.size,)) for x in xs], 0, o)
    return join(L, xs, normalize_axis(axis, o.ndim, "np.append"), o)


def _depth(x: Any) -> int:
    return 1 + _depth(x[0]) if isinstance(x, list) and x else int(isinstance(x, list))


@register("block", np.block, np.block)
def _block(L: LoweringContext, outs: list[TensorType], arrays: Any) -> Value:
    """Nested lists: the innermost are joined on the last axis, the outermost on the
    ``depth``-th from the end; every array first gets leading axes up to the result's."""
    o = outs[0]
    depth = _depth(arrays)

    def build(item: Any, level: int) -> Value:
        if isinstance(item, list):
            parts = [build(v, level + 1) for v in item]
            ax = o.ndim - (depth - level)
            kept = [p for p in parts if p.shape[ax] > 0] or parts[:1]
            return kept[0] if len(kept) == 1 else L.b.concatenate(*kept, axis=ax)
        x = L.operand(item, o.dtype, None)
        return L.b.reshape_to(x, (1,) * (o.ndim - x.ndim) + x.shape)

    return L.b.reshape_to(build(arrays, 0), o.shape)


# -- splitting ------------------------------------------------------------------------------
def slice_axis(L: LoweringContext, x: Value, ax: int, start: int, stop: int) -> Value:
    """``x[..., start:stop, ...]`` along axis ``ax`` (``x`` itself when that is all of it)."""
    if start == 0 and stop == x.shape[ax]:
        return x
    starts = [0] * x.ndim
    stops = list(x.shape)
    starts[ax], stops[ax] = start, stop
    return L.b.slice(x, start=tuple(starts), stop=tuple(stops), step=(1,) * x.ndim)


def _cut(L: LoweringContext, x: Value, ax: int, outs: list[TensorType]) -> list[Value]:
    """Consecutive pieces of ``x`` along ``ax`` with the result types ``outs``."""
    res, start = [], 0
    for o in outs:
        stop = start + o.shape[ax]
        res.append(slice_axis(L, x, ax, start, stop))
        start = stop
    return res


def _splitter(name: str, fn: Callable[..., Any]) -> None:
    """``np.<name>(ary, indices_or_sections, axis=0)``: slices along ``axis``."""

    def lower(L: LoweringContext, outs: list[TensorType], ary: Any, indices_or_sections: Any,
              axis: int = 0) -> list[Value]:
        x = L.operand(ary, None, None)
        return _cut(L, x, normalize_axis(axis, x.ndim, f"np.{name}"), outs)

    register(name, lambda *a, **k: list(fn(*a, **k)), fn)(lower)


def _fixed_splitter(name: str, fn: Callable[..., Any], axis: Callable[[int], int]) -> None:
    """``np.<name>(ary, indices_or_sections)``: slices along ``axis(ndim)``."""

    def lower(L: LoweringContext, outs: list[TensorType], ary: Any,
              indices_or_sections: Any) -> list[Value]:
        x = L.operand(ary, None, None)
        return _cut(L, x, axis(x.ndim), outs)

    register(name, lambda *a, **k: list(fn(*a, **k)), fn)(lower)


_splitter("split", np.split)
_splitter("array_split", np.array_split)
_fixed_splitter("hsplit", np.hsplit, lambda nd: 1 if nd > 1 else 0)
_fixed_splitter("vsplit", np.vsplit, lambda nd: 0)
_fixed_splitter("dsplit", np.dsplit, lambda nd: 2)


def _unstack_forward(x: Any, *, axis: int = 0) -> Any:
    return tuple(np.unstack(x, axis=axis))


@register("unstack", _unstack_forward, np.unstack)
def _unstack(L: LoweringContext, outs: list[TensorType], x: Any, *,
             axis: int = 0) -> list[Value]:
    v = L.operand(x, None, None)
    ax = normalize_axis(axis, v.ndim, "np.unstack")
    return [L.b.reshape_to(slice_axis(L, v, ax, i, i + 1), o.shape)
            for i, o in enumerate(outs)]


# -- several arrays at once -------------------------------------------------------------------
def _each(name: str, fn: Callable[..., Any]) -> None:
    """``np.<name>(*arys)``: one result per array (a tuple when there are several)."""

    def lower(L: LoweringContext, outs: list[TensorType], *arys: Any) -> Any:
        res = [L.b.reshape_to(L.operand(a, o.dtype, None), o.shape)
               for a, o in zip(arys, outs, strict=True)]
        return res if len(res) > 1 else res[0]

    register(name, fn, fn)(lower)


_each("atleast_1d", np.atleast_1d)
_each("atleast_2d", np.atleast_2d)
_each("atleast_3d", np.atleast_3d)


@register("broadcast_arrays", lambda *a, **k: tuple(np.broadcast_arrays(*a, **k)),
          np.broadcast_arrays)
def _broadcast_arrays(L: LoweringContext, outs: list[TensorType], *args: Any,
                      subok: bool = False) -> list[Value]:
    return [L.b.broadcast_to(L.operand(a, o.dtype, None), o.shape)
            for a, o in zip(args, outs, strict=True)]


def _meshgrid_forward(*xi: Any, **kw: Any) -> Any:
    return tuple(np.meshgrid(*xi, **kw))


@register("meshgrid", _meshgrid_forward, np.meshgrid)
def _meshgrid(L: LoweringContext, outs: list[TensorType], *xi: Any, copy: bool = True,
              sparse: bool = False, indexing: str = "xy") -> list[Value]:
    if indexing not in ("xy", "ij"):
        raise UnsupportedError("np.meshgrid: indexing must be 'xy' or 'ij'")
    n = len(xi)
    res = []
    for i, (a, o) in enumerate(zip(xi, outs, strict=True)):
        x = L.operand(a, o.dtype, None)
        shape = [1] * n
        shape[i] = x.type.size
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        x = L.b.reshape_to(x, tuple(shape))
        res.append(L.b.broadcast_to(x, o.shape))
    return res
