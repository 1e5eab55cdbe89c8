"""The NumPy → IR table: every supported NumPy function, ufunc, method and operator.

Each entry has a NumPy-level name (shown on the tape), the NumPy callable that computes
the example value while tracing, and a lowering that emits IR ops for it. Lowerings get
the result types NumPy produced, so dtype promotion (NEP 50) and shapes come from NumPy
itself; a lowering converts and broadcasts its operands explicitly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .tracer import Tracer, record, where


@dataclass(frozen=True)
class NumpyOp:
    name: str
    forward: Callable[..., Any]
    lower: Callable[..., Any]
    signature: inspect.Signature


TABLE: dict[str, NumpyOp] = {}
BY_FUNC: dict[Any, str] = {}


def register(name: str, forward: Callable[..., Any], *funcs: Any) -> Callable[..., Any]:
    """Register ``lower(L, outs, *args, **kwargs)`` for NumPy ``funcs`` as tape name ``name``."""

    def deco(lower: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(lower)
        params = list(sig.parameters.values())[2:]
        TABLE[name] = NumpyOp(name, forward, lower, sig.replace(parameters=params))
        for f in funcs:
            BY_FUNC[f] = name
        return lower

    return deco


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Trace NumPy-level operation ``name`` on ``args``."""
    return _call(name, args, kwargs, python_op=False)


def call_operator(name: str, *args: Any) -> Any:
    """Trace a Python operator (``+``, ``-x``, ``abs``...): on Python floats it gives a
    Python float, which stays weak (NEP 50), where the NumPy function gives np.float64."""
    return _call(name, args, {}, python_op=True)


def _call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], python_op: bool) -> Any:
    entry = TABLE[name]
    try:
        entry.signature.bind(*args, **kwargs)
    except TypeError as e:
        raise UnsupportedError(f"np.{name} at {where()}: {e} (Yota supports "
                               f"np.{name}{entry.signature})") from None
    for k, why in _REFUSED_KWARGS.items():
        v = kwargs.get(k)
        if v is not None and not (k == "where" and name == "where") and not (
                k == "order" and v == "C"):
            shown = repr(v) if isinstance(v, (str, int, float)) else "..."
            raise UnsupportedError(f"np.{name}(..., {k}={shown}) at {where()} is not "
                                   f"supported by Yota's tracer: {why}")
    return record(name, args, kwargs, entry.forward, python_op=python_op)


_REFUSED_KWARGS = {
    "out": "it would mutate an array; use the returned value",
    "where": "masked reductions are not supported; use np.where(mask, x, 0) first",
    "initial": "initial values are not supported; combine with the result instead",
    "casting": "only NumPy's default casting is supported",
    "order": "only C (row-major) order is supported",
    "subok": "subclasses are not traced",
    "signature": "ufunc loop signatures are not supported",
}


def call_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCE:
        if len(inputs) == 1:
            kwargs = {"axis": 0, **kwargs}  # ufunc.reduce reduces axis 0 by default
        return call(_UFUNC_REDUCE[ufunc.__name__], *inputs, **kwargs)
    if method != "__call__":
        raise UnsupportedError(f"np.{ufunc.__name__}.{method} at {where()} is not "
                               "supported on traced arrays")
    name = BY_FUNC.get(ufunc)
    if name is None:
        raise _unsupported(f"np.{ufunc.__name__}")
    return call(name, *inputs, **kwargs)


def call_function(func: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    name = BY_FUNC.get(func)
    if name is None:
        raise _unsupported(public_name(func))
    return call(name, *args, **kwargs)


def public_name(func: Callable[..., Any]) -> str:
    """How users spell a NumPy function: ``np.sort``, ``np.linalg.inv``, ``np.fft.fft``."""
    fname = getattr(func, "__name__", repr(func))
    for sub in ("", "linalg", "fft", "random", "lib"):
        mod = getattr(np, sub, None) if sub else np
        if getattr(mod, fname, None) is func:
            return f"np.{sub}.{fname}" if sub else f"np.{fname}"
    return f"{getattr(func, '__module__', None) or 'numpy'}.{fname}"


def _unsupported(what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{what} is not supported on traced arrays (at {where()}). Write it with supported "
        f"NumPy functions, or declare it a @yota.primitive and give it a @yota.diffrule"
    )


_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


# -- the lowering context's helpers used below ----------------------------------------------
def _operand(L: Any, a: Any, dtype: np.dtype, shape: tuple[int, ...] | None = None) -> Value:
    return L.operand(a, dtype, shape)


# -- elementwise -----------------------------------------------------------------------------
def _elementwise(ir_name: str, nargs: int, compare: bool = False) -> Callable[..., Any]:
    def lower1(L: Any, outs: list[TensorType], x: Any, **kw: Any) -> Value:
        out = outs[0]
        v = _operand(L, x, out.dtype, out.shape)
        if out.dtype.kind in _IDENTITY_ON.get(ir_name, ""):
            return v  # NumPy keeps integers under floor/ceil, bools under abs
        return L.b.emit(ir_name, v)

    def lower2(L: Any, outs: list[TensorType], x: Any, y: Any, **kw: Any) -> Value:
        out = outs[0]
        dt = L.promote(x, y) if compare else out.dtype
        return L.b.emit(ir_name, _operand(L, x, dt, out.shape), _operand(L, y, dt, out.shape))

    return lower1 if nargs == 1 else lower2


_IDENTITY_ON = {"floor": "biu", "ceil": "biu", "abs": "b"}
_UNARY = {
    "negative": "neg", "absolute": "abs", "sign": "sign", "exp": "exp", "expm1": "expm1",
    "log": "log", "log1p": "log1p", "log2": "log2", "sqrt": "sqrt", "square": "square",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
    "sinh": "sinh", "cosh": "cosh", "arctan": "arctan", "arcsin": "arcsin",
    "arccos": "arccos", "floor": "floor", "ceil": "ceil", "rint": "round",
    "logical_not": "not",
}
_BINARY = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "arctan2": "arctan2",
    "floor_divide": "floordiv", "remainder": "mod",
    "logical_and": "and", "logical_or": "or", "logical_xor": "xor",
}
_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
            "equal": "eq", "not_equal": "ne"}

for _np_name, _ir in _UNARY.items():
    _uf = getattr(np, _np_name)
    register(_np_name, _uf, _uf)(_elementwise(_ir, 1))
for _np_name, _ir in _BINARY.items():
    _uf = getattr(np, _np_name)
    register(_np_name, _uf, _uf)(_elementwise(_ir, 2))
for _np_name, _ir in _COMPARE.items():
    _uf = getattr(np, _np_name)
    register(_np_name, _uf, _uf)(_elementwise(_ir, 2, compare=True))


def _predicate(ir_name: str) -> Callable[..., Any]:
    """isnan/isinf/isfinite: a float operand kept in its own dtype, a bool result."""

    def lower(L: Any, outs: list[TensorType], x: Any, **kw: Any) -> Value:
        v = L.operand(x, None, outs[0].shape)
        return L.b.emit(ir_name, v if v.dtype.kind == "f" else L.b.convert_to(v, np.float64))

    return lower


for _np_name in ("isnan", "isinf", "isfinite"):
    _uf = getattr(np, _np_name)
    register(_np_name, _uf, _uf)(_predicate(_np_name))


def _bool_only(ir_name: str, nargs: int) -> Callable[..., Any]:
    base = _elementwise(ir_name, nargs)

    def lower(L: Any, outs: list[TensorType], *args: Any, **kw: Any) -> Value:
        if outs[0].dtype.kind != "b":
            raise UnsupportedError("bitwise operations on integer arrays are not supported "
                                   "(only on bool masks)")
        return base(L, outs, *args)

    return lower


register("bitwise_and", np.bitwise_and, np.bitwise_and)(_bool_only("and", 2))
register("bitwise_or", np.bitwise_or, np.bitwise_or)(_bool_only("or", 2))
register("bitwise_xor", np.bitwise_xor, np.bitwise_xor)(_bool_only("xor", 2))
register("invert", np.invert, np.invert)(_bool_only("not", 1))


@register("positive", np.positive, np.positive)
def _positive(L: Any, outs: list[TensorType], x: Any) -> Value:
    return _operand(L, x, outs[0].dtype, outs[0].shape)


@register("copy", np.copy, np.copy)
def _copy(L: Any, outs: list[TensorType], a: Any, order: Any = None, subok: Any = None) -> Value:
    return _operand(L, a, outs[0].dtype, outs[0].shape)


@register("log10", np.log10, np.log10)
def _log10(L: Any, outs: list[TensorType], x: Any) -> Value:
    out = outs[0]
    ln10 = L.b.const(np.log(10.0), out.dtype, out.shape)
    return L.b.div(L.b.log(_operand(L, x, out.dtype, out.shape)), ln10)



@register("power", np.power, np.power)
def _power(L: Any, outs: list[TensorType], x: Any, y: Any) -> Value:
    out = outs[0]
    base = _operand(L, x, out.dtype, out.shape)
    if isinstance(y, (int, float)) and not isinstance(y, bool) and y == 2:
        return L.b.square(base)
    return L.b.pow(base, _operand(L, y, out.dtype, out.shape))


@register("round", np.round, np.round, np.around)
def _round(L: Any, outs: list[TensorType], a: Any, decimals: int = 0, out: Any = None) -> Value:
    o = outs[0]
    x = _operand(L, a, o.dtype, o.shape)
    if o.dtype.kind != "f":
        return x
    if decimals == 0:
        return L.b.round(x)
    scale = L.b.const(10.0 ** decimals, o.dtype, o.shape)
    return L.b.div(L.b.round(L.b.mul(x, scale)), scale)


@register("where", np.where, np.where)
def _where(L: Any, outs: list[TensorType], condition: Any, x: Any = None, y: Any = None) -> Value:
    if x is None or y is None:
        raise UnsupportedError("np.where(condition) with one argument has a data-dependent "
                               "shape; use np.where(condition, x, y)")
    o = outs[0]
    c = L.operand(condition, None, None)
    if c.dtype.kind != "b":
        c = L.b.ne(c, L.b.const(0, c.dtype, c.shape))
    c = L.b.broadcast_to(c, o.shape)
    return L.b.select(c, _operand(L, x, o.dtype, o.shape), _operand(L, y, o.dtype, o.shape))


@register("clip", np.clip, np.clip)
def _clip(L: Any, outs: list[TensorType], a: Any, a_min: Any = None, a_max: Any = None,
          out: Any = None, **kw: Any) -> Value:
    o = outs[0]
    x = _operand(L, a, o.dtype, o.shape)
    lo = a_min if a_min is not None else kw.get("min")  # NumPy 2.1 added min=, max=
    hi = a_max if a_max is not None else kw.get("max")
    if lo is not None:
        x = L.b.maximum(x, _operand(L, lo, o.dtype, o.shape))
    if hi is not None:
        x = L.b.minimum(x, _operand(L, hi, o.dtype, o.shape))
    return x


def _clip_method(self: Tracer, min: Any = None, max: Any = None, **kw: Any) -> Any:
    return call("clip", self, min, max, **kw)  # ndarray.clip: either bound may be left out


def _divmod_forward(x: Any, y: Any) -> tuple[Any, Any]:
    return np.floor_divide(x, y), np.remainder(x, y)


@register("divmod", _divmod_forward, np.divmod)
def _divmod(L: Any, outs: list[TensorType], x: Any, y: Any) -> list[Value]:
    o = outs[0]
    a, b = _operand(L, x, o.dtype, o.shape), _operand(L, y, o.dtype, o.shape)
    return [L.b.floordiv(a, b), L.b.mod(a, b)]


def _fill(value: float | None) -> Callable[..., Any]:
    def lower(L: Any, outs: list[TensorType], a: Any, fill_value: Any = None, dtype: Any = None,
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


@register("astype", lambda x, dtype, copy=True: np.asarray(x).astype(dtype))
def _astype(L: Any, outs: list[TensorType], x: Any, dtype: Any, copy: bool = True) -> Value:
    return L.operand(x, outs[0].dtype, None)


# -- reductions -----------------------------------------------------------------------------
def int_tuple(v: Any) -> tuple[int, ...]:
    """An axis or shape argument (an int, NumPy integer, or a sequence of them)."""
    return (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)


def norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = int_tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise UnsupportedError(f"axis {a} is out of bounds for a {ndim}-d array")
        if ndim:  # NumPy accepts axis 0 or -1 of a 0-d array, reducing nothing
            out.append(a % ndim)
    return tuple(sorted(set(out)))


def _reduce(L: Any, ir_name: str, x: Value, axes: tuple[int, ...], keepdims: bool,
            out: TensorType) -> Value:
    r = L.b.emit(ir_name, x, axes=axes)
    return L.b.reshape_to(r, out.shape) if keepdims else r


def _reduction(ir_name: str) -> Callable[..., Any]:
    def lower(L: Any, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
              out: Any = None, keepdims: bool = False, initial: Any = None,
              where: Any = None) -> Value:
        o = outs[0]
        x = L.operand(a, o.dtype, None)
        return _reduce(L, ir_name, x, norm_axes(axis, x.ndim), keepdims, o)

    return lower


register("sum", np.sum, np.sum)(_reduction("sum"))
register("prod", np.prod, np.prod)(_reduction("prod"))
register("max", np.max, np.max, np.amax)(_reduction("max"))
register("min", np.min, np.min, np.amin)(_reduction("min"))


@register("mean", np.mean, np.mean)
def _mean(L: Any, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
          out: Any = None, keepdims: bool = False, where: Any = None) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    axes = norm_axes(axis, x.ndim)
    s = _reduce(L, "sum", x, axes, keepdims, o)
    n = int(np.prod([x.shape[i] for i in axes]))
    return L.b.div(s, L.b.const(n, o.dtype, o.shape))


def _moment(sqrt: bool) -> Callable[..., Any]:
    def lower(L: Any, outs: list[TensorType], a: Any, axis: Any = None, dtype: Any = None,
              out: Any = None, ddof: int = 0, keepdims: bool = False, where: Any = None,
              mean: Any = None, correction: Any = None) -> Value:
        o = outs[0]
        x = L.operand(a, o.dtype, None)
        axes = norm_axes(axis, x.ndim)
        n = int(np.prod([x.shape[i] for i in axes]))
        kshape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        b = L.b
        m = b.div(b.reshape_to(b.sum(x, axes=axes), kshape), b.const(n, o.dtype, kshape))
        d = b.sub(x, b.broadcast_to(m, x.shape))
        ss = _reduce(L, "sum", b.mul(d, d), axes, keepdims, o)
        dof = max(n - (correction if correction is not None else ddof), 0)  # as NumPy
        v = b.div(ss, b.const(dof, o.dtype, o.shape))
        return b.sqrt(v) if sqrt else v

    return lower


register("var", np.var, np.var)(_moment(False))
register("std", np.std, np.std)(_moment(True))


def _argreduce(ir_name: str) -> Callable[..., Any]:
    def lower(L: Any, outs: list[TensorType], a: Any, axis: Any = None, out: Any = None,
              keepdims: bool = False) -> Value:
        o = outs[0]
        x = L.operand(a, None, None)
        if axis is None:
            x = L.b.reshape_to(x, (x.type.size,))
            axis = 0
        r = L.b.emit(ir_name, x, axis=norm_axes(axis, x.ndim)[0])
        return L.b.convert_to(L.b.reshape_to(r, o.shape), o.dtype)

    return lower


register("argmax", np.argmax, np.argmax)(_argreduce("argmax"))
register("argmin", np.argmin, np.argmin)(_argreduce("argmin"))


# -- linear algebra ---------------------------------------------------------------------------
def matmul_values(L: Any, a: Value, b: Value, out: TensorType) -> Value:
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
def _matmul(L: Any, outs: list[TensorType], x1: Any, x2: Any) -> Value:
    return matmul_values(L, L.operand(x1, None, None), L.operand(x2, None, None), outs[0])


@register("dot", np.dot, np.dot)
def _dot(L: Any, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0:
        return L.b.mul(L.b.broadcast_to(x, o.shape), L.b.broadcast_to(y, o.shape))
    if x.ndim > 2 or y.ndim > 2:
        raise UnsupportedError("np.dot of arrays with more than 2 dimensions is not supported; "
                               "use np.matmul or np.tensordot-free reshapes")
    return matmul_values(L, x, y, o)


@register("inner", np.inner, np.inner)
def _inner(L: Any, outs: list[TensorType], a: Any, b: Any) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if x.ndim == 0 or y.ndim == 0:
        return L.b.mul(L.b.broadcast_to(x, o.shape), L.b.broadcast_to(y, o.shape))
    if y.ndim > 2:
        raise UnsupportedError("np.inner with a >2-d second operand is not supported")
    yt = L.b.transpose(y, perm=(1, 0)) if y.ndim == 2 else y
    return matmul_values(L, x, yt, o)


@register("outer", np.outer, np.outer)
def _outer(L: Any, outs: list[TensorType], a: Any, b: Any, out: Any = None) -> Value:
    o = outs[0]
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    x = L.b.broadcast_to(L.b.reshape_to(x, (x.type.size, 1)), o.shape)
    y = L.b.broadcast_to(L.b.reshape_to(y, (1, y.type.size)), o.shape)
    return L.b.mul(x, y)


# -- shape ops --------------------------------------------------------------------------------
def _reshaping(L: Any, outs: list[TensorType], a: Any, *args: Any, **kw: Any) -> Value:
    return L.b.reshape_to(L.operand(a, outs[0].dtype, None), outs[0].shape)



@register("reshape", np.reshape, np.reshape)
def _reshape(L: Any, outs: list[TensorType], a: Any, shape: Any = None, order: str = "C",
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
register("atleast_1d", np.atleast_1d, np.atleast_1d)(lambda L, outs, a: _reshaping(L, outs, a))
register("atleast_2d", np.atleast_2d, np.atleast_2d)(lambda L, outs, a: _reshaping(L, outs, a))


@register("broadcast_to", np.broadcast_to, np.broadcast_to)
def _broadcast_to(L: Any, outs: list[TensorType], array: Any, shape: Any,
                  subok: bool = False) -> Value:
    return L.b.broadcast_to(L.operand(array, outs[0].dtype, None), outs[0].shape)


def _perm_lower(L: Any, x: Value, perm: tuple[int, ...]) -> Value:
    if tuple(perm) == tuple(range(x.ndim)):
        return x
    return L.b.transpose(x, perm=tuple(perm))


@register("transpose", np.transpose, np.transpose)
def _transpose(L: Any, outs: list[TensorType], a: Any, axes: Any = None) -> Value:
    x = L.operand(a, None, None)
    if axes is None or axes == ():
        perm = tuple(range(x.ndim))[::-1]
    else:
        perm = tuple(ax % x.ndim for ax in int_tuple(axes))
    return _perm_lower(L, x, perm)


@register("swapaxes", np.swapaxes, np.swapaxes)
def _swapaxes(L: Any, outs: list[TensorType], a: Any, axis1: int, axis2: int) -> Value:
    x = L.operand(a, None, None)
    perm = list(range(x.ndim))
    i, j = axis1 % x.ndim, axis2 % x.ndim
    perm[i], perm[j] = perm[j], perm[i]
    return _perm_lower(L, x, tuple(perm))


@register("moveaxis", np.moveaxis, np.moveaxis)
def _moveaxis(L: Any, outs: list[TensorType], a: Any, source: Any, destination: Any) -> Value:
    x = L.operand(a, None, None)
    src = [s % x.ndim for s in int_tuple(source)]
    dst = [d % x.ndim for d in int_tuple(destination)]
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return _perm_lower(L, x, tuple(order))


@register("concatenate", np.concatenate, np.concatenate)
def _concatenate(L: Any, outs: list[TensorType], arrays: Any, axis: Any = 0, out: Any = None,
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
def _stack(L: Any, outs: list[TensorType], arrays: Any, axis: int = 0, out: Any = None,
           dtype: Any = None, casting: Any = None) -> Value:
    o = outs[0]
    ax = axis % o.ndim
    xs = [L.operand(a, o.dtype, None) for a in arrays]
    xs = [L.b.reshape_to(x, x.shape[:ax] + (1,) + x.shape[ax:]) for x in xs]
    return xs[0] if len(xs) == 1 else L.b.concatenate(*xs, axis=ax)


def _split_forward(ary: Any, indices_or_sections: Any, axis: int = 0) -> Any:
    return list(np.split(ary, indices_or_sections, axis))


@register("split", _split_forward, np.split)
def _split(L: Any, outs: list[TensorType], ary: Any, indices_or_sections: Any,
           axis: int = 0) -> list[Value]:
    x = L.operand(ary, None, None)
    ax = axis % x.ndim
    res, start = [], 0
    for o in outs:
        stop = start + o.shape[ax]
        res.append(slice_axis(L, x, ax, start, stop))
        start = stop
    return res


def slice_axis(L: Any, x: Value, ax: int, start: int, stop: int) -> Value:
    if start == 0 and stop == x.shape[ax]:
        return x
    starts = [0] * x.ndim
    stops = list(x.shape)
    starts[ax], stops[ax] = start, stop
    return L.b.slice(x, start=tuple(starts), stop=tuple(stops), step=(1,) * x.ndim)


# -- indexing -------------------------------------------------------------------------------
@register("getitem", lambda x, key: x[key])
def _getitem(L: Any, outs: list[TensorType], x: Any, key: Any) -> Value:
    from .indexing import lower_getitem

    return lower_getitem(L, L.operand(x, None, None), key, outs[0])


# -- methods and operators of Tracer ------------------------------------------------------------
def _method(name: str) -> Callable[..., Any]:
    def method(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        return call(name, self, *args, **kwargs)

    method.__name__ = name
    return method


def _reshape_method(self: Tracer, *shape: Any, order: str = "C") -> Any:
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    return call("reshape", self, shape, order=order)


def _transpose_method(self: Tracer, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = tuple(axes[0]) if axes[0] is not None else ()
    return call("transpose", self, axes or None)


def _is_mask(k: Any) -> bool:
    if isinstance(k, (Tracer, np.ndarray)):
        return k.dtype.kind == "b"
    if isinstance(k, list):
        return bool(k) and all(_is_mask(v) for v in k)
    return isinstance(k, (bool, np.bool_))


def _getitem_method(self: Tracer, key: Any) -> Any:
    for k in key if isinstance(key, tuple) else (key,):
        if _is_mask(k):
            raise UnsupportedError(
                f"boolean mask indexing at {where()}: the result's shape would depend on the "
                "data. Use np.where(mask, x, 0) or integer indices instead")
    return call("getitem", self, key)


def _binop(name: str, reflected: bool = False) -> Callable[..., Any]:
    def op(self: Tracer, other: Any) -> Any:
        if isinstance(other, str):
            return NotImplemented
        return call_operator(name, *((other, self) if reflected else (self, other)))

    return op


_OPERATORS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
}
for _op, _np_name in _OPERATORS.items():
    setattr(Tracer, f"__{_op}__", _binop(_np_name))
    setattr(Tracer, f"__r{_op}__", _binop(_np_name, reflected=True))
for _op, _np_name in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                      ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")]:
    setattr(Tracer, f"__{_op}__", _binop(_np_name))
Tracer.__neg__ = lambda self: call_operator("negative", self)  # type: ignore[attr-defined]
Tracer.__pos__ = lambda self: call_operator("positive", self)  # type: ignore[attr-defined]
Tracer.__abs__ = lambda self: call_operator("absolute", self)  # type: ignore[attr-defined]
Tracer.__invert__ = lambda self: call_operator("invert", self)  # type: ignore[attr-defined]
Tracer.__getitem__ = _getitem_method  # type: ignore[attr-defined]
Tracer.reshape = _reshape_method  # type: ignore[attr-defined]
Tracer.transpose = _transpose_method  # type: ignore[attr-defined]
Tracer.T = property(lambda self: call("transpose", self))  # type: ignore[attr-defined]
Tracer.mT = property(lambda self: call("swapaxes", self, -1, -2))  # type: ignore[attr-defined]
Tracer.flatten = lambda self, order="C": call("ravel", self)  # type: ignore[attr-defined]
Tracer.clip = _clip_method  # type: ignore[attr-defined]
Tracer.__divmod__ = _binop("divmod")  # type: ignore[attr-defined]
Tracer.__rdivmod__ = _binop("divmod", reflected=True)  # type: ignore[attr-defined]
for _m in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "ravel",
           "squeeze", "swapaxes", "dot", "astype", "copy", "round"):
    setattr(Tracer, _m, _method(_m))
