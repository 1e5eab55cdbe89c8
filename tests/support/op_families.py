"""The op table's families, each op with its NumPy counterpart (and the domain its inputs
are drawn from: ``n`` normal, ``p`` positive, ``u`` within (-1, 1), ``s`` signed zeros,
NaNs and infinities), and small programs: shared by the op-table and round-trip tests."""

from __future__ import annotations

import numpy as np
from yota.ir import Builder, Function, TensorType

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

FLOAT_UNARY = {"exp": (np.exp, "n"), "expm1": (np.expm1, "n"), "log": (np.log, "p"),
               "log1p": (np.log1p, "p"), "log2": (np.log2, "p"), "sqrt": (np.sqrt, "p"),
               "reciprocal": (np.reciprocal, "n"), "sin": (np.sin, "n"), "cos": (np.cos, "n"),
               "tan": (np.tan, "n"), "tanh": (np.tanh, "n"), "sinh": (np.sinh, "n"),
               "cosh": (np.cosh, "n"), "arctan": (np.arctan, "n"), "arcsin": (np.arcsin, "u"),
               "arccos": (np.arccos, "u"), "floor": (np.floor, "n"), "ceil": (np.ceil, "n"),
               "round": (np.rint, "n")}
NUMERIC_UNARY = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
BINARY = {"add": (np.add, "n"), "sub": (np.subtract, "n"), "mul": (np.multiply, "n"),
          "div": (np.true_divide, "n"), "pow": (np.power, "p"),
          "floordiv": (np.floor_divide, "p"), "mod": (np.mod, "p"),
          "arctan2": (np.arctan2, "n"), "maximum": (np.maximum, "s"),
          "minimum": (np.minimum, "s")}
COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}
LOGIC = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def two_output_callee() -> Function:
    """``x + y`` and its row sums, for x: f64[2, 3] and a row y: f64[3] (a callee)."""
    b = Builder("two")
    x, y = b.input(TensorType(F64, (2, 3))), b.input(TensorType(F64, (3,)))
    s = b.add(x, b.broadcast(y, shape=(2, 3)))
    return b.build([s, b.sum(s, axes=(1,))])


def kernel_body() -> Function:
    """A fused kernel: domain [2, 3], a broadcast input, elementwise ops, a row sum."""
    b = Builder("k")
    x, y = b.input(TensorType(F32, (2, 3))), b.input(TensorType(F32, (3,)))
    t = b.tanh(b.mul(x, b.broadcast(y, shape=(2, 3))))
    s = b.add(t, b.const(1.0, F32, (2, 3)))
    return b.build([s, b.sum(s, axes=(1,))], attrs={"domain": (2, 3), "reduce_axes": (1,)})
