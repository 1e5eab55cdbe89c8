"""Array creation: from a template (``zeros_like``, ``ones_like``, ``empty_like`` (zeros, so
results are reproducible) and ``full_like``, on traced arrays), and from shapes alone
(``full``, ``eye``, ``identity``, ``tri``, ``arange``, ``linspace``): the entries that
``generated`` records for the constants of the trace a program computes, built from
``iota`` ops exactly as NumPy computes them. ``linspace``, ``logspace`` and ``geomspace``
with traced endpoints (or bases) are compositions (``registry.compose``): NumPy's steps,
written with NumPy calls on the traced values, so their gradients flow to the endpoints."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.ops import iota
from yota.ir.types import TensorType

from .registry import Lower, LoweringContext, compose, register


def _fill(value: float | None) -> Lower:
    def lower(L: LoweringContext, outs: list[TensorType], a: Any, fill_value: Any = None, dtype: Any = None,
              order: Any = None, subok: Any = None, shape: Any = None) -> Value:
        o = outs[0]
        v = value if value is not None else fill_value
        if L.is_traced(v):
            return L.b.broadcast_to(L.operand(v, o.dtype, None), o.shape)
        return L.b.const(v, o.dtype, o.shape)

    return lower


register("zeros_like", np.zeros_like, np.zeros_like)(_fill(0))
register("ones_like", np.ones_like, np.ones_like)(_fill(1))
register("empty_like", np.zeros_like, np.empty_like)(_fill(0))
register("full_like", np.full_like, np.full_like)(_fill(None))


# -- arrays made from shapes alone (recipes of ``generated``): computed, never stored --------
@register("full", np.full)
def _full(L: LoweringContext, outs: list[TensorType], shape: Any, fill_value: Any,
          dtype: Any = None, order: Any = "C", *, like: Any = None, device: Any = None) -> Value:
    o = outs[0]
    return L.b.const(np.asarray(fill_value).astype(o.dtype), o.dtype, o.shape)


@register("eye", np.eye)
def _eye(L: LoweringContext, outs: list[TensorType], N: int, M: int | None = None, k: int = 0,
         dtype: Any = float, order: Any = "C", *, like: Any = None, device: Any = None) -> Value:
    o = outs[0]
    return iota.eye(L.b, o.shape, int(k), o.dtype, small=False)


@register("identity", np.identity)
def _identity(L: LoweringContext, outs: list[TensorType], n: int, dtype: Any = None, *,
              like: Any = None) -> Value:
    o = outs[0]
    return iota.eye(L.b, o.shape, 0, o.dtype, small=False)


@register("tri", np.tri)
def _tri(L: LoweringContext, outs: list[TensorType], N: int, M: int | None = None, k: int = 0,
         dtype: Any = float, *, like: Any = None) -> Value:
    o = outs[0]
    return iota.tri(L.b, o.shape, int(k), o.dtype, small=False)


def _arange_bounds(start: Any = None, stop: Any = None, step: Any = None, dtype: Any = None,
                   *, device: Any = None, like: Any = None) -> tuple[Any, Any]:
    """(start, step) of a call ``np.arange(...)``, as NumPy reads its arguments."""
    if stop is None:
        start = 0
    return (0 if start is None else start), (1 if step is None else step)


@register("arange", np.arange)
def _arange(L: LoweringContext, outs: list[TensorType], *args: Any, **kwargs: Any) -> Value:
    """NumPy's ``arange``: ``start``, then ``start + step`` (Python arithmetic), each
    converted to the dtype; element i >= 2 is ``first + i * (second - first)`` in it."""
    b, o = L.b, outs[0]
    start, step = _arange_bounds(*args, **kwargs)
    dt = o.dtype
    with np.errstate(all="ignore"):
        first, second = np.array(start).astype(dt), np.array(start + step).astype(dt)
        delta = np.subtract(second, first, dtype=dt)
        one = np.add(first, np.multiply(np.ones((), dt), delta, dtype=dt), dtype=dt)
        zero = np.add(first, np.multiply(np.zeros((), dt), delta, dtype=dt), dtype=dt)
    i = iota.index_along(b, o.shape, 0, dt)
    y = b.add(b.const(first, dt, o.shape), b.mul(i, b.const(delta, dt, o.shape)))
    for k, (want, got) in enumerate(((first, zero), (second, one))):
        if want.tobytes() != got.tobytes() and o.shape[0] > k:
            y = _set_at(b, y, k, want)
    return y


def _set_at(b: Any, y: Value, k: int, v: np.ndarray) -> Value:
    """``y`` (1-D) with element ``k`` replaced by the scalar ``v``."""
    at = b.eq(iota.index_along(b, y.shape, 0), b.const(k, np.int64, y.shape))
    return b.select(at, b.const(v, y.dtype, y.shape), y)


@register("linspace", np.linspace)
def _linspace(L: LoweringContext, outs: list[TensorType], start: Any, stop: Any, num: int = 50,
              endpoint: bool = True, retstep: bool = False, dtype: Any = None, axis: int = 0,
              *, device: Any = None) -> Value:
    """NumPy's ``linspace`` of scalar endpoints, step by step as NumPy computes it."""
    b, o = L.b, outs[0]
    if retstep or np.ndim(start) or np.ndim(stop):
        raise UnsupportedError("np.linspace is computed by the program only for scalar "
                               "endpoints without retstep")
    dt = np.result_type(start, stop, 1.0)
    n, div = o.shape[0], (num - 1) if endpoint else num
    with np.errstate(all="ignore"):
        delta = np.subtract(stop, start, dtype=dt)
        step = delta / div if div > 0 else None
    y = iota.index_along(b, o.shape, 0, dt)
    if step is None or step == 0:
        if step is not None:
            y = b.div(y, b.const(div, dt, o.shape))
        y = b.mul(y, b.const(delta, dt, o.shape))
    else:
        y = b.mul(y, b.const(step, dt, o.shape))
    y = b.add(y, b.const(np.asarray(start).astype(dt), dt, o.shape))
    if endpoint and n > 1:
        y = _set_at(b, y, n - 1, np.asarray(stop).astype(dt))
    if o.dtype.kind in "iu":
        y = b.floor(y)
    return b.convert_to(y, o.dtype)


# -- traced endpoints: NumPy's steps on the traced values ------------------------------------------
def _stand_in(x: Any) -> Any:
    """What ``np.result_type`` sees of ``x``: a Python scalar (traced or not) is weak."""
    if isinstance(x, (int, float, bool)) or getattr(x, "weak", False):
        return type(getattr(x, "value", x))(0)
    return np.zeros((), np.asarray(x).dtype)


@compose(np.linspace)
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0, *,
             device: Any = None) -> Any:
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    dt = np.result_type(_stand_in(start), _stand_in(stop), 1.0)
    start, stop = np.asarray(start, dtype=dt), np.asarray(stop, dtype=dt)
    delta = stop - start
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * np.ndim(delta))
    if div > 0:
        step: Any = delta / div
        # NumPy divides first when a step is 0 (start == stop): both, chosen by the data
        y = np.where(np.any(step == 0), y / div * delta, y * step)
    else:
        step, y = np.nan, y * delta
    y = y + start
    if endpoint and num > 1:
        y[-1, ...] = stop
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if dtype is not None and np.dtype(dtype).kind in "iu":
        y = np.floor(y)
    y = y if dtype is None else y.astype(dtype)
    return (y, step) if retstep else y


@compose(np.logspace)
def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    if not isinstance(base, (float, int)) and np.ndim(base):  # bases broadcast, as NumPy
        ndmax = len(np.broadcast_shapes(np.shape(start), np.shape(stop), np.shape(base)))
        start, stop, base = (np.array(a, ndmin=ndmax) if np.ndim(a) < ndmax else a
                             for a in (start, stop, base))
        base = np.expand_dims(base, axis=axis)
    out = np.power(base, linspace(start, stop, num=num, endpoint=endpoint, axis=axis))
    return out if dtype is None else out.astype(dtype)


@compose(np.geomspace)
def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    start, stop = np.asarray(start), np.asarray(stop)
    if np.any(start == 0) or np.any(stop == 0):  # (guards, as in user code)
        raise ValueError("Geometric sequence cannot include zero")
    dt = np.result_type(_stand_in(start), _stand_in(stop), float(num),
                        np.zeros((), dtype))
    dtype = dt if dtype is None else np.dtype(dtype)
    start, stop = start.astype(dt), stop.astype(dt)
    sign = np.sign(start)  # negative values: the sign moved out, as NumPy does
    start, stop = start / sign, stop / sign
    result = logspace(np.log10(start), np.log10(stop), num=num, endpoint=endpoint,
                      base=10.0, dtype=dt)
    if num > 0:  # the endpoints exactly
        result[0] = start
        if num > 1 and endpoint:
            result[-1] = stop
    result = sign * result
    if axis != 0:
        result = np.moveaxis(result, 0, axis)
    return result.astype(dtype)
