"""The Python-level functions of ``scipy.special`` on traced arrays: ``logsumexp``
(``axis``, ``b=``, ``keepdims``, ``return_sign``), ``softmax``, ``log_softmax``,
``polygamma`` and ``multigammaln``, as SciPy defines them (``logsumexp`` of an empty
axis is ``-inf``, ``log_softmax`` shifts by a finite maximum only...).

They are not ufuncs, so the tracer does not see them: each is hooked (``hooks.hook``:
``yota.foreign`` makes the function answer traced arguments while a trace runs, names
bound by ``from scipy.special import logsumexp`` included) and records the entry
registered here, named ``scipy.special.<name>``; SciPy's own function computes the
example values.

    >>> import numpy as np, yota
    >>> from scipy.special import logsumexp
    >>> _, g = yota.grad(lambda x: logsumexp(x), np.zeros(4))
    >>> g[0].tolist()  # the softmax
    [0.25, 0.25, 0.25, 0.25]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from ..userloc import where as user_line
from .axes import norm_axes
from .hooks import TraceAPI, hook
from .registry import LoweringContext, register
from .special import scipy_forward
from .static import static_value


def _shape(L: LoweringContext, a: Any) -> tuple[int, ...]:
    t = L.type_of(a)
    return t.shape if t is not None else np.shape(a)


def _kept(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _reduce(b: Builder, name: str, x: Value, axes: tuple[int, ...]) -> Value:
    """``name`` over ``axes``, keeping them (size 1)."""
    return b.reshape_to(b.emit(name, x, axes=axes), _kept(x.shape, axes))


def _finite_or_zero(b: Builder, m: Value) -> Value:
    return b.select(b.isfinite(m), m, b.const(0.0, m.dtype, m.shape))


def _operand(L: LoweringContext, a: Any, out: TensorType, shape: tuple[int, ...]) -> Value:
    if out.dtype.kind != "f":
        raise UnsupportedError(f"scipy.special at {user_line()}: {out.dtype} results are "
                               "not supported on traced arrays")
    return L.b.reshape_to(L.operand(a, out.dtype, shape), shape or (1,))


@register("scipy.special.logsumexp", scipy_forward("logsumexp"))
def _logsumexp(L: LoweringContext, outs: list[TensorType], a: Any, axis: Any = None,
               b: Any = None, keepdims: bool = False, return_sign: bool = False) -> Any:
    o = outs[0]
    shape = np.broadcast_shapes(_shape(L, a), _shape(L, b) if b is not None else ())
    x = _operand(L, a, o, shape)
    B = L.b
    axes = norm_axes(axis, x.ndim)
    if any(x.shape[i] == 0 for i in axes):
        out = B.const(-math.inf, o.dtype, o.shape)
        return [out, B.const(-1.0, o.dtype, o.shape)] if return_sign else out
    m = _finite_or_zero(B, _reduce(B, "max", x, axes))
    e = B.exp(B.sub(x, B.broadcast_to(m, x.shape)))
    if b is not None:
        e = B.mul(e, _operand(L, b, o, shape))
    s = _reduce(B, "sum", e, axes)
    sign = B.reshape_to(B.sign(s), o.shape)
    r = B.reshape_to(B.add(B.log(B.abs(s) if return_sign else s), m), o.shape)
    return [r, sign] if return_sign else r


def _axis_operand(L: LoweringContext, outs: list[TensorType], x: Any, axis: Any
                  ) -> tuple[Value, tuple[int, ...]]:
    o = outs[0]
    v = L.operand(x, o.dtype, o.shape)
    return v, norm_axes(axis, v.ndim)


@register("scipy.special.softmax", scipy_forward("softmax"))
def _softmax(L: LoweringContext, outs: list[TensorType], x: Any, axis: Any = None) -> Value:
    v, axes = _axis_operand(L, outs, x, axis)
    B = L.b
    e = B.exp(B.sub(v, B.broadcast_to(_reduce(B, "max", v, axes), v.shape)))
    return B.div(e, B.broadcast_to(_reduce(B, "sum", e, axes), v.shape))


@register("scipy.special.log_softmax", scipy_forward("log_softmax"))
def _log_softmax(L: LoweringContext, outs: list[TensorType], x: Any, axis: Any = None
                 ) -> Value:
    v, axes = _axis_operand(L, outs, x, axis)
    B = L.b
    tmp = B.sub(v, B.broadcast_to(_finite_or_zero(B, _reduce(B, "max", v, axes)), v.shape))
    return B.sub(tmp, B.broadcast_to(B.log(_reduce(B, "sum", B.exp(tmp), axes)), v.shape))


def _static_int(L: LoweringContext, v: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(static_value(L, v, what, "it picks the function"))
    except UnsupportedError:
        raise UnsupportedError(f"{what} at {user_line()}: the order must be a constant "
                               "(a Python int or an array of them), not computed from the "
                               "function's inputs") from None


@register("scipy.special.polygamma", scipy_forward("polygamma"))
def _polygamma(L: LoweringContext, outs: list[TensorType], n: Any, x: Any) -> Value:
    o = outs[0]
    orders = np.broadcast_to(_static_int(L, n, "scipy.special.polygamma"), o.shape)
    v = L.operand(x, o.dtype, o.shape)
    B = L.b
    out = B.const(math.nan, o.dtype, o.shape)  # SciPy: NaN for a negative or fractional n
    for k in np.unique(orders):
        if k < 0 or k != int(k):
            continue
        y = B.emit("digamma", v) if k == 0 else B.emit("polygamma", v, n=int(k))
        if orders.size and np.all(orders == k):
            return y
        mask = B.const(orders == k, np.bool_, o.shape)
        out = B.select(mask, y, out)
    return out


@register("scipy.special.multigammaln", scipy_forward("multigammaln"))
def _multigammaln(L: LoweringContext, outs: list[TensorType], a: Any, d: Any) -> Value:
    """``d(d-1)/4 log(pi) + sum_j lgamma(a - j/2)``, j < d. SciPy's check that
    ``a > (d-1)/2`` runs on the example values while tracing only."""
    o = outs[0]
    dim = int(_static_int(L, d, "scipy.special.multigammaln"))
    v = L.operand(a, o.dtype, o.shape)
    B = L.b
    total = B.const(dim * (dim - 1) * 0.25 * math.log(math.pi), o.dtype, o.shape)
    for j in range(dim):
        total = B.add(total, B.emit("lgamma", B.sub(v, B.const(j / 2, o.dtype, o.shape))))
    return total


def _version(name: str) -> Callable[..., Any]:
    def version(api: TraceAPI, *args: Any, **kwargs: Any) -> Any:
        return api.call(f"scipy.special.{name}", *args, **kwargs)

    return version


for _name in ("logsumexp", "softmax", "log_softmax", "polygamma"):
    hook("scipy.special", _name)(_version(_name))


@hook("scipy.special", "multigammaln")
def _multigammaln_version(api: TraceAPI, a: Any, d: Any) -> Any:
    """SciPy's check ``a > (d - 1)/2``, a guard on traced ``a`` (other values that fail it
    trace again and raise as SciPy does), then the entry."""
    if np.any(np.less_equal(a, 0.5 * (d - 1))):
        raise ValueError(f"condition a > 0.5 * (d-1) ({0.5 * (d - 1)}) not met")
    return api.call("scipy.special.multigammaln", a, d)
