"""Scans: ``cumsum``, ``cumprod``, ``nancumsum`` and ``nancumprod`` (and the methods).

A scan along an axis of length n is ceil(log2 n) elementwise steps (Hillis-Steele): step
k combines each element with the one 2**k before it (the identity before the start), so
the work stays elementwise and vectorized, and the gradient (a reversed scan) comes from
the rules of slices, concatenations, adds and multiplies; a product with zeros is exact
(no division). The sums are associated differently from NumPy's sequential loop: equal
up to rounding.

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sum(np.cumsum(x)), np.ones(4))
    >>> g[0].tolist()
    [4.0, 3.0, 2.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.types import TensorType

from .registry import LoweringContext, register
from .static import operand_along


def _shifted(L: LoweringContext, x: Value, axis: int, k: int, identity: float) -> Value:
    """``x`` moved ``k`` places along ``axis``, the first ``k`` places the identity."""
    n = x.shape[axis]
    head_shape = tuple(k if i == axis else s for i, s in enumerate(x.shape))
    head = L.b.const(identity, x.dtype, head_shape)
    start = (0,) * x.ndim
    stop = tuple(n - k if i == axis else s for i, s in enumerate(x.shape))
    body = L.b.emit("slice", x, start=start, stop=stop, step=(1,) * x.ndim)
    return L.b.emit("concatenate", head, body, axis=axis)


def _scan(name: str, op: str, identity: float, skip_nans: bool) -> Any:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
              dtype: Any = None, out: Any = None) -> Value:
        o = outs[0]
        x, ax = operand_along(L, a, axis, o.dtype, f"np.{name}")
        if skip_nans and x.dtype.kind == "f":
            x = L.b.emit("select", L.b.emit("isnan", x), L.b.const(identity, x.dtype, x.shape),
                         x)
        k = 1
        while k < x.shape[ax]:
            x = L.b.emit(op, x, _shifted(L, x, ax, k, identity))
            k *= 2
        return L.b.reshape_to(x, o.shape)

    return lower


register("cumsum", np.cumsum, np.cumsum, np.cumulative_sum)(_scan("cumsum", "add", 0.0, False))
register("cumprod", np.cumprod, np.cumprod, np.cumulative_prod)(
    _scan("cumprod", "mul", 1.0, False))
register("nancumsum", np.nancumsum, np.nancumsum)(_scan("nancumsum", "add", 0.0, True))
register("nancumprod", np.nancumprod, np.nancumprod)(_scan("nancumprod", "mul", 1.0, True))
