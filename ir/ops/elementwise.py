"""Elementwise ops: operands of one shape (broadcasting is explicit in the IR)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import BOOL, TensorType, as_dtype, is_bool
from .table import OpDef, register, types_str


def _same(name: str, types: list[TensorType]) -> TensorType:
    t0 = types[0]
    for t in types[1:]:
        if t != t0:
            raise IRTypeError(
                f"'{name}' needs operands of one type (broadcast and convert first); "
                f"got {types_str(types)}"
            )
    return t0


def _check_kind(name: str, t: TensorType, kinds: str, what: str) -> None:
    if t.dtype.kind not in kinds:
        raise IRTypeError(f"'{name}' needs {what} operands, got {t}")


def _unary(name: str, ufunc: Callable[..., Any], kinds: str, what: str, source: str,
           out_bool: bool = False) -> None:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        _check_kind(name, types[0], kinds, what)
        return types[0].with_dtype(BOOL) if out_bool else types[0]

    register(OpDef(name, 1, infer, ufunc, elementwise=True, source=source))


def _binary(name: str, ufunc: Callable[..., Any], kinds: str, what: str, source: str,
            out_bool: bool = False) -> None:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        t = _same(name, types)
        _check_kind(name, t, kinds, what)
        return t.with_dtype(BOOL) if out_bool else t

    register(OpDef(name, 2, infer, ufunc, elementwise=True, source=source))


FLOAT, NUM, ANY, LOGIC = "f", "iuf", "biuf", "b"

for _name, _fn in [
    ("exp", np.exp), ("expm1", np.expm1), ("log", np.log), ("log1p", np.log1p),
    ("log2", np.log2), ("sqrt", np.sqrt), ("reciprocal", np.reciprocal), ("sin", np.sin),
    ("cos", np.cos), ("tan", np.tan), ("tanh", np.tanh), ("sinh", np.sinh),
    ("cosh", np.cosh), ("arctan", np.arctan), ("arcsin", np.arcsin), ("arccos", np.arccos),
    ("floor", np.floor), ("ceil", np.ceil), ("round", np.rint),
]:
    _unary(_name, _fn, FLOAT, "float", f"np.{_fn.__name__}({{0}})")

_unary("neg", np.negative, NUM, "numeric", "(-{0})")
_unary("abs", np.abs, NUM, "numeric", "np.abs({0})")
_unary("sign", np.sign, NUM, "numeric", "np.sign({0})")
_unary("square", np.square, NUM, "numeric", "np.square({0})")
_unary("isnan", np.isnan, FLOAT, "float", "np.isnan({0})", out_bool=True)
_unary("isinf", np.isinf, FLOAT, "float", "np.isinf({0})", out_bool=True)
_unary("isfinite", np.isfinite, FLOAT, "float", "np.isfinite({0})", out_bool=True)
_unary("not", np.logical_not, LOGIC, "bool", "np.logical_not({0})")

_binary("add", np.add, ANY, "numeric", "({0} + {1})")
_binary("mul", np.multiply, ANY, "numeric", "({0} * {1})")
_binary("sub", np.subtract, NUM, "numeric", "({0} - {1})")
_binary("div", np.true_divide, FLOAT, "float", "({0} / {1})")
_binary("pow", np.power, NUM, "numeric", "({0} ** {1})")
_binary("floordiv", np.floor_divide, NUM, "numeric", "({0} // {1})")
_binary("mod", np.mod, NUM, "numeric", "({0} % {1})")
_binary("arctan2", np.arctan2, FLOAT, "float", "np.arctan2({0}, {1})")
_binary("maximum", np.maximum, ANY, "numeric", "np.maximum({0}, {1})")
_binary("minimum", np.minimum, ANY, "numeric", "np.minimum({0}, {1})")
_COMPARISONS: list[tuple[str, np.ufunc, str]] = [
    ("lt", np.less, "<"), ("le", np.less_equal, "<="), ("gt", np.greater, ">"),
    ("ge", np.greater_equal, ">="), ("eq", np.equal, "=="), ("ne", np.not_equal, "!="),
]
for _cmp, _ufunc, _src in _COMPARISONS:
    _binary(_cmp, _ufunc, ANY, "numeric", f"({{0}} {_src} {{1}})", out_bool=True)
_binary("and", np.logical_and, LOGIC, "bool", "({0} & {1})")
_binary("or", np.logical_or, LOGIC, "bool", "({0} | {1})")
_binary("xor", np.logical_xor, LOGIC, "bool", "({0} ^ {1})")


def _select_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    c, a, b = types
    if not is_bool(c.dtype):
        raise IRTypeError(f"'select' needs a bool condition, got {c}")
    if not (a == b and c.shape == a.shape):
        raise IRTypeError(f"'select' needs a condition and two branches of one shape and "
                          f"branches of one dtype; got {types_str(types)}")
    return a


register(OpDef("select", 3, _select_infer, np.where, elementwise=True,
               source="np.where({0}, {1}, {2})"))


def _convert_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    return types[0].with_dtype(attrs["dtype"])


def _convert_impl(x: np.ndarray, *, dtype: np.dtype) -> np.ndarray:
    return np.asarray(x).astype(dtype)


register(OpDef("convert", 1, _convert_infer, _convert_impl, attrs={"dtype": as_dtype},
               elementwise=True, source="{0}.astype(np.{dtype})"))
