"""Shape manipulation: ``reshape``, ``ravel``, ``expand_dims``, ``squeeze``,
``atleast_1d``/``2d``, ``broadcast_to``, ``transpose``, ``swapaxes`` and ``moveaxis``."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .axes import int_tuple
from .registry import LoweringContext, register


def _reshaping(L: LoweringContext, outs: list[TensorType], a: Any, *args: Any, **kw: Any) -> Value:
    return L.b.reshape_to(L.operand(a, outs[0].dtype, None), outs[0].shape)


@register("reshape", np.reshape, np.reshape)
def _reshape(L: LoweringContext, outs: list[TensorType], a: Any, shape: Any = None, order: str = "C",
             newshape: Any = None, copy: Any = None) -> Value:
    if order != "C":
        raise UnsupportedError("reshape with order other than 'C' is not supported")
    return _reshaping(L, outs, a)


register("ravel", np.ravel, np.ravel)(
    lambda L, outs, a, order="C": _reshaping(L, outs, a))
register("expand_dims", np.expand_dims, np.expand_dims)(
    lambda L, outs, a, axis: _reshaping(L, outs, a))
register("squeeze", np.squeeze, np.squeeze)(
    lambda L, outs, a, axis=None: _reshaping(L, outs, a))


@register("broadcast_to", np.broadcast_to, np.broadcast_to)
def _broadcast_to(L: LoweringContext, outs: list[TensorType], array: Any, shape: Any,
                  subok: bool = False) -> Value:
    return L.b.broadcast_to(L.operand(array, outs[0].dtype, None), outs[0].shape)


def _perm_lower(L: LoweringContext, x: Value, perm: tuple[int, ...]) -> Value:
    if tuple(perm) == tuple(range(x.ndim)):
        return x
    return L.b.transpose(x, perm=tuple(perm))


@register("transpose", np.transpose, np.transpose)
def _transpose(L: LoweringContext, outs: list[TensorType], a: Any, axes: Any = None) -> Value:
    x = L.operand(a, None, None)
    if axes is None or axes == ():
        perm = tuple(range(x.ndim))[::-1]
    else:
        perm = tuple(ax % x.ndim for ax in int_tuple(axes))
    return _perm_lower(L, x, perm)


@register("swapaxes", np.swapaxes, np.swapaxes)
def _swapaxes(L: LoweringContext, outs: list[TensorType], a: Any, axis1: int, axis2: int) -> Value:
    x = L.operand(a, None, None)
    perm = list(range(x.ndim))
    i, j = axis1 % x.ndim, axis2 % x.ndim
    perm[i], perm[j] = perm[j], perm[i]
    return _perm_lower(L, x, tuple(perm))


@register("moveaxis", np.moveaxis, np.moveaxis)
def _moveaxis(L: LoweringContext, outs: list[TensorType], a: Any, source: Any, destination: Any) -> Value:
    x = L.operand(a, None, None)
    src = [s % x.ndim for s in int_tuple(source)]
    dst = [d % x.ndim for d in int_tuple(destination)]
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _perm_lower(L, x, tuple(order))


# -- the array-API spellings (NumPy 2) ----------------------------------------------------------
register("permute_dims", np.permute_dims, np.permute_dims)(
    lambda L, outs, a, axes=None: _transpose(L, outs, a, axes))


def _matrix_transpose(L: LoweringContext, outs: list[TensorType], x: Any) -> Value:
    return _swapaxes(L, outs, x, -1, -2)


register("matrix_transpose", np.matrix_transpose, np.matrix_transpose,
         np.linalg.matrix_transpose)(_matrix_transpose)
