"""Elementwise NumPy functions that are not ufuncs: ``where``, ``clip``, ``round``,
``copy`` and ``astype`` (the array method)."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .registry import LoweringContext, register


@register("copy", np.copy, np.copy)
def _copy(L: LoweringContext, outs: list[TensorType], a: Any, order: Any = None, subok: Any = None) -> Value:
    return L.operand(a, outs[0].dtype, outs[0].shape)


@register("round", np.round, np.round, np.around)
def _round(L: LoweringContext, outs: list[TensorType], a: Any, decimals: int = 0, out: Any = None) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, o.shape)
    if o.dtype.kind != "f":
        return x
    if decimals == 0:
        return L.b.round(x)
    scale = L.b.const(10.0 ** decimals, o.dtype, o.shape)
    return L.b.div(L.b.round(L.b.mul(x, scale)), scale)


@register("where", np.where, np.where)
def _where(L: LoweringContext, outs: list[TensorType], condition: Any, x: Any = None, y: Any = None) -> Value:
    if x is None or y is None:
        raise UnsupportedError("np.where(condition) with one argument has a data-dependent "
                               "shape; use np.where(condition, x, y)")
    o = outs[0]
    c = L.operand(condition, None, None)
    if c.dtype.kind != "b":
        c = L.b.ne(c, L.b.const(0, c.dtype, c.shape))
    c = L.b.broadcast_to(c, o.shape)
    return L.b.select(c, L.operand(x, o.dtype, o.shape), L.operand(y, o.dtype, o.shape))


@register("clip", np.clip, np.clip)
def _clip(L: LoweringContext, outs: list[TensorType], a: Any, a_min: Any = None, a_max: Any = None,
          out: Any = None, **kw: Any) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, o.shape)
    lo = a_min if a_min is not None else kw.get("min")  # NumPy 2.1 added min=, max=
    hi = a_max if a_max is not None else kw.get("max")
    if lo is not None:
        x = L.b.maximum(x, L.operand(lo, o.dtype, o.shape))
    if hi is not None:
        x = L.b.minimum(x, L.operand(hi, o.dtype, o.shape))
    return x


@register("astype", lambda x, dtype, copy=True: np.asarray(x).astype(dtype))
def _astype(L: LoweringContext, outs: list[TensorType], x: Any, dtype: Any, copy: bool = True) -> Value:
    return L.operand(x, outs[0].dtype, None)
