"""The special functions (``yota.ir.ops.special``) as ``arith``/``math`` ops: each op's
algorithm, written once in the scalar language of ``yota.ir.ops.special_scalar``,
inlined into the ``linalg.generic`` body that computes it (float64; a float32 element
is widened and the result rounded once). ``exp``, ``log``, ``log1p``, ``sin`` and
``tan`` become libm calls or LLVM intrinsics, as every other math op of the export.

Importing this module registers the emitters in ``scalar.SCALAR``; ``polygamma`` takes
its order from the op's attributes (``scalar.ATTR_SCALAR``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from yota.ir.ops.special import ALGORITHMS, algorithm
from yota.ir.ops.special_scalar import F

from .scalar import ATTR_SCALAR, SCALAR, convert
from .text import Lines

_F64, _BOOL = np.dtype(np.float64), np.dtype(np.bool_)
_UNARY = {"neg": "arith.negf", "abs": "math.absf", "sqrt": "math.sqrt", "exp": "math.exp",
          "log": "math.log", "log1p": "math.log1p", "floor": "math.floor",
          "rint": "math.roundeven", "sin": "math.sin", "tan": "math.tan"}
_BINARY = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf", "div": "arith.divf"}
_PRED = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


class MLIREmit:
    """The scalar language as SSA lines: float64 values and ``i1`` masks."""

    def __init__(self, L: Lines) -> None:
        self.L = L

    def const(self, v: float) -> str:
        return self.L.const(v, _F64)

    def unary(self, name: str, a: str) -> str:
        return self.L.op(f"{_UNARY[name]} {a} : f64")

    def binary(self, name: str, a: str, b: str) -> str:
        return self.L.op(f"{_BINARY[name]} {a}, {b} : f64")

    def compare(self, pred: str, a: str, b: str) -> str:
        return self.L.op(f"arith.cmpf {_PRED[pred]}, {a}, {b} : f64")

    def logic(self, name: str, a: str, b: str | None) -> str:
        if b is None:
            return self.L.op(f"arith.xori {a}, {self.L.const(True, _BOOL)} : i1")
        return self.L.op(f"arith.{'andi' if name == 'and' else 'ori'} {a}, {b} : i1")

    def select(self, c: str, a: str, b: str) -> str:
        return self.L.op(f"arith.select {c}, {a}, {b} : f64")

    def isnan(self, a: str) -> str:
        return self.L.op(f"arith.cmpf uno, {a}, {a} : f64")


def emit_special(name: str, L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype,
                 attrs: dict[str, Any]) -> str:
    x = convert(L, xs[0], dts[0], _F64)
    r = algorithm(name, attrs)(F(MLIREmit(L), x)).v
    return convert(L, r, _F64, out)


def _emitter(name: str) -> Any:
    return lambda L, xs, dts, out: emit_special(name, L, xs, dts, out, {})


ATTR_SCALAR["polygamma"] = lambda L, xs, dts, out, attrs: emit_special(
    "polygamma", L, xs, dts, out, attrs)
for _name in ALGORITHMS:
    if _name not in ATTR_SCALAR:
        SCALAR[_name] = _emitter(_name)
