"""NumPy's ufuncs, the targets of Python's operators: arithmetic, math, comparisons,
logic, bitwise operations on masks, float predicates and ``divmod``.

A lowering converts and broadcasts its operands to the result type NumPy computed, so
dtype promotion (NEP 50) comes from NumPy itself; comparisons convert to the operands'
promoted dtype instead, since their result is bool.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yota.ir.core import Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .registry import Lower, LoweringContext, register

_IDENTITY_ON = {"floor": "biu", "ceil": "biu", "abs": "b"}
_UNARY = {
    "negative": "neg", "absolute": "abs", "sign": "sign", "exp": "exp", "expm1": "expm1",
    "log": "log", "log1p": "log1p", "log2": "log2", "sqrt": "sqrt", "square": "square",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
    "sinh": "sinh", "cosh": "cosh", "arctan": "arctan", "arcsin": "arcsin",
    "arccos": "arccos", "floor": "floor", "ceil": "ceil", "rint": "round",
    "logical_not": "not",
}
_BINARY = {  # np.power has its own lowering below (x**2 is a square)
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div",
    "maximum": "maximum", "minimum": "minimum", "arctan2": "arctan2",
    "floor_divide": "floordiv", "remainder": "mod",
    "logical_and": "and", "logical_or": "or", "logical_xor": "xor",
}
_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
            "equal": "eq", "not_equal": "ne"}


def elementwise(ir_name: str, nargs: int, compare: bool = False) -> Lower:
    """The lowering of a unary or binary ufunc that is one IR op."""

    def lower1(L: LoweringContext, outs: list[TensorType], x: Any, **kw: Any) -> Value:
        out = outs[0]
        v = L.operand(x, out.dtype, out.shape)
        if out.dtype.kind in _IDENTITY_ON.get(ir_name, ""):
            return v  # NumPy keeps integers under floor/ceil, bools under abs
        return L.b.emit(ir_name, v)

    def lower2(L: LoweringContext, outs: list[TensorType], x: Any, y: Any, **kw: Any) -> Value:
        out = outs[0]
        dt = L.promote(x, y) if compare else out.dtype
        return L.b.emit(ir_name, L.operand(x, dt, out.shape), L.operand(y, dt, out.shape))

    return lower1 if nargs == 1 else lower2


def _register_ufunc(np_name: str, lower: Lower) -> None:
    uf = getattr(np, np_name)
    register(np_name, uf, uf)(lower)


for _np_name, _ir in _UNARY.items():
    _register_ufunc(_np_name, elementwise(_ir, 1))
for _np_name, _ir in _BINARY.items():
    _register_ufunc(_np_name, elementwise(_ir, 2))
for _np_name, _ir in _COMPARE.items():
    _register_ufunc(_np_name, elementwise(_ir, 2, compare=True))


def _predicate(ir_name: str) -> Lower:
    """isnan/isinf/isfinite: a float operand kept in its own dtype, a bool result."""

    def lower(L: LoweringContext, outs: list[TensorType], x: Any, **kw: Any) -> Value:
        v = L.operand(x, None, outs[0].shape)
        return L.b.emit(ir_name, v if v.dtype.kind == "f" else L.b.convert_to(v, np.float64))

    return lower


for _np_name in ("isnan", "isinf", "isfinite"):
    _register_ufunc(_np_name, _predicate(_np_name))


def _bool_only(ir_name: str, nargs: int) -> Lower:
    base = elementwise(ir_name, nargs)

    def lower(L: LoweringContext, outs: list[TensorType], *args: Any, **kw: Any) -> Value:
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
def _positive(L: LoweringContext, outs: list[TensorType], x: Any) -> Value:
    return L.operand(x, outs[0].dtype, outs[0].shape)


@register("log10", np.log10, np.log10)
def _log10(L: LoweringContext, outs: list[TensorType], x: Any) -> Value:
    out = outs[0]
    ln10 = L.b.const(np.log(10.0), out.dtype, out.shape)
    return L.b.div(L.b.log(L.operand(x, out.dtype, out.shape)), ln10)


@register("power", np.power, np.power)
def _power(L: LoweringContext, outs: list[TensorType], x: Any, y: Any) -> Value:
    out = outs[0]
    base = L.operand(x, out.dtype, out.shape)
    if isinstance(y, (int, float)) and not isinstance(y, bool) and y == 2:
        return L.b.square(base)
    return L.b.pow(base, L.operand(y, out.dtype, out.shape))


def _divmod_forward(x: Any, y: Any) -> tuple[Any, Any]:
    return np.floor_divide(x, y), np.remainder(x, y)


@register("divmod", _divmod_forward, np.divmod)
def _divmod(L: LoweringContext, outs: list[TensorType], x: Any, y: Any) -> list[Value]:
    o = outs[0]
    a, b = L.operand(x, o.dtype, o.shape), L.operand(y, o.dtype, o.shape)
    return [L.b.floordiv(a, b), L.b.mod(a, b)]


