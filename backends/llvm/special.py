"""The special functions (``yota.ir.ops.special``) as vector code: each op's algorithm,
written once in the scalar language of ``yota.ir.ops.special_scalar``, rendered here on
float64 vectors of the kernel's lane count (float32 operands are widened and the result
rounded once). Straight-line code with selects, vectorized like any other elementwise
op; ``exp``, ``log``, ``log1p``, ``sin`` and ``tan`` are glibc's libmvec calls
(``vecmath.vector_math``), the rest LLVM instructions without fast-math flags, so the
arithmetic rounds as the NumPy reference does.

Importing this module registers the emitters in ``vecmath.ELEMENTWISE``.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
import numpy as np
from yota.ir.ops.special import ALGORITHMS, algorithm
from yota.ir.ops.special_scalar import F

from .vecmath import ELEMENTWISE, VCtx, fcmp, isnan, vector_math

F64 = np.dtype(np.float64)
_INTRINSIC = {"abs": "llvm.fabs", "sqrt": "llvm.sqrt", "floor": "llvm.floor",
              "rint": "llvm.roundeven"}
_LIBM = ("exp", "log", "log1p", "sin", "tan")
_ARITH = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_PRED = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=="}


class LLVMEmit:
    """The scalar language on float64 vectors of ``c.n`` lanes."""

    def __init__(self, c: VCtx) -> None:
        self.c = c

    def const(self, v: float) -> ir.Value:
        return self.c.splat(F64, v)

    def unary(self, name: str, a: ir.Value) -> ir.Value:
        if name == "neg":
            return self.c.b.fneg(a)
        if name in _LIBM:
            return vector_math(self.c, name, [a], F64)
        return self.c.intr(_INTRINSIC[name], a)

    def binary(self, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
        return getattr(self.c.b, _ARITH[name])(a, b)

    def compare(self, pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
        if pred == "ne":
            return fcmp(self.c, "!=", a, b, ordered=False)
        return fcmp(self.c, _PRED[pred], a, b)

    def logic(self, name: str, a: ir.Value, b: ir.Value | None) -> ir.Value:
        if b is None:
            return self.c.b.not_(a)
        return self.c.b.and_(a, b) if name == "and" else self.c.b.or_(a, b)

    def select(self, c: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.c.b.select(c, a, b)

    def isnan(self, a: ir.Value) -> ir.Value:
        return isnan(self.c, a)


def _emitter(name: str) -> Any:
    def emit(c: VCtx, xs: list[ir.Value], dts: list[np.dtype], out: np.dtype,
             attrs: dict[str, Any]) -> ir.Value:
        x = xs[0]
        narrow = np.dtype(dts[0]) != F64
        if narrow:
            x = c.b.fpext(x, c.vt(F64))
        r = algorithm(name, attrs)(F(LLVMEmit(c), x)).v
        return c.b.fptrunc(r, c.vt(out)) if narrow else r

    return emit


for _name in ALGORITHMS:
    ELEMENTWISE[_name] = _emitter(_name)
