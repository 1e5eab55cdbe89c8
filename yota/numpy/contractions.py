"""Contractions: ``matmul`` (and ``@``), ``dot``, ``inner`` and ``outer``."""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .registry import LoweringContext, register


def matmul_values(L: LoweringContext, a: Value, b: Value, out: TensorType) -> Value:
    """NumPy matmul semantics: 1-D operands promoted, batch dimensions broadcast."""
    bld = L.b
    a, b = bld.convert_to(a, out.dtype), bld.convert_to(b, out.dtype)
    a2 = bld.reshape_to(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = bld.reshape_to(b, b.shape + (1,)) if b.ndim == 1 else b
    batch = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    a2 = bld.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = bld.broadcast_to(b2, batch + b2.shape[-2:])
    return bld.reshape_to(bld.matmul(a2, b2), out.shape)


@register("matmul", np.matmul, np.matmul)
def _matmul(L: LoweringContext, outs: list[TensorType], x1: Any, x2: Any) -> Value:
    return matmul_values(L, L.operand(x1, None, None), L.operand(x2, None, None), outs[0])


@register("dot", np.dot, np.dot)
def _dot(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0:
        return L.b.mul(L.b.broadcast_to(x, o.shape), L.b.broadcast_to(y, o.shape))
    if x.ndim > 2 or y.ndim > 2:
        raise UnsupportedError("np.dot of arrays with more than 2 dimensions is not supported; "
                               "use np.matmul or np.tensordot-free reshapes")
    return matmul_values(L, x, y, o)


@register("inner", np.inner, np.inner)
def _inner(L: LoweringContext, outs: list[TensorType], a: Any, b: Any) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0:
        return L.b.mul(L.b.broadcast_to(x, o.shape), L.b.broadcast_to(y, o.shape))
    if y.ndim > 2:
        raise UnsupportedError("np.inner with a >2-d second operand is not supported")
    yt = L.b.transpose(y, perm=(1, 0)) if y.ndim == 2 else y
    return matmul_values(L, x, yt, o)


@register("outer", np.outer, np.outer)
def _outer(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    x = L.b.broadcast_to(L.b.reshape_to(x, (x.type.size, 1)), o.shape)
    y = L.b.broadcast_to(L.b.reshape_to(y, (1, y.type.size)), o.shape)
    return L.b.mul(x, y)
