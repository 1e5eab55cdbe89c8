"""Joining and splitting: ``concatenate``, ``stack`` and ``split``."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.types import TensorType

from .registry import LoweringContext, register


@register("concatenate", np.concatenate, np.concatenate)
def _concatenate(L: LoweringContext, outs: list[TensorType], arrays: Any, axis: Any = 0, out: Any = None,
                 dtype: Any = None, casting: Any = None) -> Value:
    o = outs[0]
    xs = [L.operand(a, o.dtype, None) for a in arrays]
    if axis is None:
        xs = [L.b.reshape_to(x, (x.type.size,)) for x in xs]
        axis = 0
    xs = [x for x in xs if x.shape[axis % x.ndim] > 0] or xs[:1]
    if len(xs) == 1:
        return L.b.reshape_to(xs[0], o.shape)
    return L.b.concatenate(*xs, axis=axis % o.ndim)


@register("stack", np.stack, np.stack)
def _stack(L: LoweringContext, outs: list[TensorType], arrays: Any, axis: int = 0, out: Any = None,
           dtype: Any = None, casting: Any = None) -> Value:
    o = outs[0]
    ax = axis % o.ndim
    xs = [L.operand(a, o.dtype, None) for a in arrays]
    xs = [L.b.reshape_to(x, x.shape[:ax] + (1,) + x.shape[ax:]) for x in xs]
    return xs[0] if len(xs) == 1 else L.b.concatenate(*xs, axis=ax)


def _split_forward(ary: Any, indices_or_sections: Any, axis: int = 0) -> Any:
    return list(np.split(ary, indices_or_sections, axis))


@register("split", _split_forward, np.split)
def _split(L: LoweringContext, outs: list[TensorType], ary: Any, indices_or_sections: Any,
           axis: int = 0) -> list[Value]:
    x = L.operand(ary, None, None)
    ax = axis % x.ndim
    res, start = [], 0
    for o in outs:
        stop = start + o.shape[ax]
        res.append(slice_axis(L, x, ax, start, stop))
        start = stop
    return res


def slice_axis(L: LoweringContext, x: Value, ax: int, start: int, stop: int) -> Value:
    """``x[..., start:stop, ...]`` along axis ``ax`` (``x`` itself when that is all of it)."""
    if start == 0 and stop == x.shape[ax]:
        return x
    starts = [0] * x.ndim
    stops = list(x.shape)
    starts[ax], stops[ax] = start, stop
    return L.b.slice(x, start=tuple(starts), stop=tuple(stops), step=(1,) * x.ndim)
