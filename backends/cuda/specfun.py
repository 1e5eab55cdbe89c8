"""The special functions (``yota.ir.ops.special``) as CUDA C device functions.

Each op's algorithm, written once in the scalar language of
``yota.ir.ops.special_scalar``, is rendered as straight-line double-precision C
(``y_sf_lgamma``, ``y_sf_polygamma_2``...), the same operations in the same order as the
NumPy reference and the llvm backend, so the three agree to the ulps of ``exp``/``log``;
a float32 element is widened and the result rounded once. Kernels are compiled with
``-fmad=false``, so no multiply-add is contracted.

A module holds the definitions of the functions its kernels call (``definitions``), not
all of them: each is ~100 lines that NVRTC would otherwise compile for every kernel.
Importing this module registers the op -> expression emitters in ``cexpr.EXPRS`` (and
``ATTR_EXPRS`` for ``polygamma``, whose function depends on its order).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

import numpy as np
from yota.ir.ops.special import ALGORITHMS, algorithm
from yota.ir.ops.special_scalar import F

from .cexpr import EXPRS, literal

_F64 = np.dtype(np.float64)
_UNARY = {"neg": "(-{0})", "abs": "fabs({0})", "sqrt": "sqrt({0})", "exp": "exp({0})",
          "log": "log({0})", "log1p": "log1p({0})", "floor": "floor({0})",
          "rint": "rint({0})", "sin": "sin({0})", "tan": "tan({0})"}
_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=",
           "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}


class CEmit:
    """The scalar language as C statements, one named temporary per operation."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _tmp(self, ctype: str, expr: str) -> str:
        name = f"t{len(self.lines)}"
        self.lines.append(f"  const {ctype} {name} = {expr};")
        return name

    def const(self, v: float) -> str:
        return literal(v, _F64)

    def unary(self, name: str, a: str) -> str:
        return self._tmp("double", _UNARY[name].format(a))

    def binary(self, name: str, a: str, b: str) -> str:
        return self._tmp("double", f"({a} {_BINARY[name]} {b})")

    def compare(self, pred: str, a: str, b: str) -> str:
        return self._tmp("bool", f"({a} {_BINARY[pred]} {b})")

    def logic(self, name: str, a: str, b: str | None) -> str:
        return self._tmp("bool", f"(!{a})" if b is None else f"({a} {_BINARY[name]} {b})")

    def select(self, c: str, a: str, b: str) -> str:
        return self._tmp("double", f"({c} ? {a} : {b})")

    def isnan(self, a: str) -> str:
        return self._tmp("bool", f"({a} != {a})")


def function_name(op: str, attrs: dict[str, Any]) -> str:
    """The device function of ``op`` with attributes ``attrs`` (``y_sf_polygamma_2``)."""
    return "y_sf_" + "_".join([op, *(str(attrs[k]) for k in sorted(attrs))])


@cache
def _definition(name: str) -> str:
    op, *params = name[len("y_sf_"):].split("_")
    attrs = {"n": int(params[0])} if params else {}
    e = CEmit()
    r = algorithm(op, attrs)(F(e, "x")).v
    return "\n".join([f"__device__ double {name}(double x) {{", *e.lines,
                      f"  return {r};", "}"])


_CALL = re.compile(r"\by_sf_[a-z0-9]+(?:_\d+)?(?=\()")


def definitions(sources: Iterable[str]) -> str:
    """The device functions the kernel ``sources`` call, defined (empty if none)."""
    names = sorted({m for s in sources for m in _CALL.findall(s)})
    return "\n\n".join(_definition(n) for n in names)


def _emitter(op: str) -> Any:
    def emit(xs: list[str], dts: list[np.dtype], out: np.dtype, fast: bool) -> str:
        return _call(op, {}, xs[0], out)

    return emit


def _call(op: str, attrs: dict[str, Any], x: str, out: np.dtype) -> str:
    fn = function_name(op, attrs)
    if np.dtype(out) == _F64:
        return f"{fn}({x})"
    return f"((float){fn}((double){x}))"


# ops whose expression depends on their attributes: emit(xs, dts, out, attrs)
ATTR_EXPRS = {"polygamma": lambda xs, dts, out, attrs: _call("polygamma", attrs, xs[0], out)}
for _op in ALGORITHMS:
    if _op not in ATTR_EXPRS:
        EXPRS[_op] = _emitter(_op)
