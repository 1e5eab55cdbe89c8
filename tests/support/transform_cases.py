"""Small programs over every op of the op table, for the forward-mode and batching tests
(``test_transform_ops.py``): each case builds a function around one op and samples
valid inputs (``sample(rng)``: positive definite matrices where a factorization needs
them, indices in range), so a batch is a stack of samples.

An elementwise op without a case here is tested by ``generic_case`` on inputs in
(0.2, 0.8); an op that needs attributes or other inputs needs a case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from yota.ir import OPS, Builder, Function, Value, type_of
from yota.ir.loops import loop_op

Make = Callable[..., Any]
Sample = Callable[[np.random.Generator], list[np.ndarray]]


@dataclass
class Case:
    op: str
    make: Make  # make(b, *inputs) -> output(s)
    sample: Sample
    id: str = ""

    def build(self, args: Sequence[np.ndarray]) -> Function:
        b = Builder(f"case_{self.op}")
        xs = [b.input(type_of(a), f"x{i}") for i, a in enumerate(args)]
        out = self.make(b, *xs)
        return b.build(list(out) if isinstance(out, (list, tuple)) else [out])

    @property
    def name(self) -> str:
        return f"{self.op}-{self.id}" if self.id else self.op


def uni(lo: float, hi: float, *shapes: tuple[int, ...]) -> Sample:
    return lambda r: [r.uniform(lo, hi, s) for s in shapes]


def signed(lo: float, hi: float, *shapes: tuple[int, ...]) -> Sample:
    return lambda r: [r.uniform(lo, hi, s) * r.choice([-1.0, 1.0], s) for s in shapes]


CASES: list[Case] = []


def case(op: str, make: Make, sample: Sample, id: str = "") -> None:
    CASES.append(Case(op, make, sample, id))


# -- elementwise --------------------------------------------------------------------------------
UNARY = {
    "exp": (-2, 2), "expm1": (-2, 2), "log": (0.5, 3), "log1p": (-0.5, 2), "log2": (0.5, 3),
    "sqrt": (0.5, 3), "reciprocal": (0.5, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1, 1),
    "tanh": (-2, 2), "sinh": (-2, 2), "cosh": (-2, 2), "arctan": (-2, 2),
    "arcsin": (-0.8, 0.8), "arccos": (-0.8, 0.8), "square": (-2, 2), "neg": (-2, 2),
    "floor": (0.1, 0.9), "ceil": (0.1, 0.9), "round": (0.1, 0.4), "sign": (0.2, 1.0),
    "isnan": (-1, 1), "isinf": (-1, 1), "isfinite": (-1, 1),
}
for _name, (_lo, _hi) in UNARY.items():
    case(_name, lambda b, x, _n=_name: b.emit(_n, x), uni(_lo, _hi, (2, 3)))
case("abs", lambda b, x: b.abs(x), signed(0.2, 2, (2, 3)))
if "polygamma" in OPS:  # (the special functions' family)
    case("polygamma", lambda b, x: b.polygamma(x, n=1), uni(0.5, 3, (4,)))

BINARY = {"add": (-2, 2), "sub": (-2, 2), "mul": (-2, 2), "div": (0.5, 2), "pow": (0.5, 2),
          "arctan2": (0.3, 2), "maximum": (-2, 2), "minimum": (-2, 2), "mod": (0.7, 2),
          "floordiv": (0.7, 2)}
for _name, (_lo, _hi) in BINARY.items():
    case(_name, lambda b, x, y, _n=_name: b.emit(_n, x, y), uni(_lo, _hi, (2, 3), (2, 3)))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    case(_name, lambda b, x, y, _n=_name: b.select(b.emit(_n, x, y), x, y),
         uni(-1, 1, (3,), (3,)))
for _name in ("and", "or", "xor"):
    case(_name, lambda b, x, y, _n=_name: b.select(
        b.emit(_n, b.gt(x, b.const(0.0, shape=(3,))), b.gt(y, b.const(0.0, shape=(3,)))),
        x, y), uni(-1, 1, (3,), (3,)))
case("not", lambda b, x: b.select(b.emit("not", b.gt(x, b.const(0.0, shape=(3,)))), x,
                                  b.neg(x)), uni(-1, 1, (3,)))
case("select", lambda b, c, x, y: b.select(b.gt(c, b.const(0.0, shape=(2, 3))), b.sin(x), y),
     uni(-1, 1, (2, 3), (2, 3), (2, 3)))
case("convert", lambda b, x: b.convert_to(b.mul(b.convert_to(x, "f32"), b.const(
    np.float32(1.5), shape=(3,))), "f64"), uni(-1, 1, (3,)), "f32")
case("convert", lambda b, x, i: b.add(x, b.convert_to(i, "f64")),
     lambda r: [r.uniform(-1, 1, 3), r.integers(0, 5, 3)], "int")
case("iota", lambda b, x: b.mul(x, b.iota(shape=(2, 3), axis=1, dtype="f64")),
     uni(-1, 1, (2, 3)))
case("const", lambda b, x: b.mul(x, b.const(np.arange(6.0).reshape(2, 3))), uni(-1, 1, (2, 3)))

# -- reductions -----------------------------------------------------------------------------------
for _name in ("sum", "prod", "max", "min"):
    case(_name, lambda b, x, _n=_name: b.emit(_n, x, axes=(1,)), signed(0.5, 1.5, (2, 3, 2)))
    case(_name, lambda b, x, _n=_name: b.emit(_n, x, axes=(0, 2)), signed(0.5, 1.5, (2, 3, 2)),
         "02")
for _name in ("argmax", "argmin"):
    case(_name, lambda b, x, _n=_name: b.add(b.convert_to(b.emit(_n, x, axis=1), "f64"),
                                             b.sum(x, axes=(1,))), uni(-1, 1, (3, 4)))

# -- shape ops ------------------------------------------------------------------------------------
case("reshape", lambda b, x: b.reshape(x, shape=(3, 2)), uni(-1, 1, (2, 3)))
case("transpose", lambda b, x: b.transpose(x, perm=(2, 0, 1)), uni(-1, 1, (2, 3, 4)))
case("broadcast", lambda b, x: b.broadcast(x, shape=(2, 4, 3)), uni(-1, 1, (4, 1)))
case("broadcast", lambda b, x: b.broadcast(x, shape=(2, 3)), uni(-1, 1, ()), "0d")
case("sum_to", lambda b, x: b.sum_to(x, shape=(3, 1)), uni(-1, 1, (2, 3, 4)))
case("sum_to", lambda b, x: b.sum_to(x, shape=()), uni(-1, 1, (2, 3)), "0d")
case("slice", lambda b, x: b.slice(x, start=(0, 1), stop=(3, 5), step=(2, 2)),
     uni(-1, 1, (4, 5)))
case("flip", lambda b, x: b.flip(x, axes=(1,)), uni(-1, 1, (2, 3)))
case("pad", lambda b, x: b.pad(x, low=(1, 0), high=(0, 2), interior=(1, 0)),
     uni(-1, 1, (2, 3)))
case("concatenate", lambda b, x, y: b.concatenate(x, y, axis=1), uni(-1, 1, (2, 3), (2, 1)))

# -- indexing and writes --------------------------------------------------------------------------


def _idx(lo: int, hi: int, shape: tuple[int, ...], *floats: tuple[int, ...]) -> Sample:
    return lambda r: [r.uniform(-1, 1, s) for s in floats] + [r.integers(lo, hi, shape)]


case("gather", lambda b, x, i: b.gather(x, i, axis=1), _idx(-4, 4, (2, 3), (2, 4, 3)))
case("gather", lambda b, x, i, j: b.gather(x, i, j, axis=0),
     lambda r: [r.uniform(-1, 1, (3, 4)), r.integers(0, 3, (5,)), r.integers(0, 4, (5,))], "2")
case("scatter_add", lambda b, u, i: b.scatter_add(u, i, axis=0, shape=(4, 2)),
     _idx(0, 4, (5,), (5, 2)))
case("scatter", lambda b, x, u, i: b.scatter(x, u, i, axis=1),
     lambda r: [r.uniform(-1, 1, (2, 5)), r.uniform(-1, 1, (2, 3)), r.permutation(5)[:3]])
case("update_slice", lambda b, x, u: b.update_slice(x, u, start=(1, 0), stop=(3, 3),
                                                    step=(1, 2)),
     uni(-1, 1, (3, 3), (2, 2)))

# -- products and LAPACK --------------------------------------------------------------------------
case("matmul", lambda b, x, y: b.matmul(x, y), uni(-1, 1, (3, 4), (4, 2)))
case("matmul", lambda b, x, y: b.matmul(x, y), uni(-1, 1, (2, 3, 1), (2, 1, 4)), "outer")
case("matmul", lambda b, x, y: b.matmul(x, y), uni(-1, 1, (3, 4), (4, 1)), "vec")
# the second operand first: "mixed" batches the left one only
case("matmul", lambda b, y, x: b.matmul(x, y), uni(-1, 1, (4, 2), (3, 4)), "rows")
case("matmul", lambda b, y, x: b.matmul(x, y), uni(-1, 1, (1, 4), (3, 1)), "col")
case("matmul", lambda b, y, x: b.matmul(x, y), uni(-1, 1, (2, 4, 2), (2, 3, 4)), "batch")


def _spd(b: Builder, a: Value) -> Value:
    """``a aᵀ + n I`` (positive definite)."""
    n = a.shape[-1]
    at = b.transpose(a, perm=(1, 0))
    return b.add(b.matmul(a, at), b.const(np.eye(n) * n))


case("cholesky", lambda b, a: b.cholesky(_spd(b, a)), uni(-1, 1, (3, 3)))
case("triangular_solve", lambda b, a, x: b.triangular_solve(
    b.add(a, b.const(np.eye(3) * 3)), x, lower=True, transpose=False, unit_diagonal=False),
    uni(-1, 1, (3, 3), (3, 2)))
case("triangular_solve", lambda b, a, x: b.triangular_solve(
    b.add(a, b.const(np.eye(3) * 3)), x, lower=False, transpose=True, unit_diagonal=True),
    uni(-1, 1, (3, 3), (3, 2)), "ut")
case("lu", lambda b, a: b.lu(b.add(a, b.const(np.diag([3.0, 2.0, 4.0]))))[0],
     uni(-0.3, 0.3, (3, 3)))
case("pivots", lambda b, a: b.add(b.sum(a, axes=(0,)), b.convert_to(b.pivots(
    b.lu(a)[1]), "f64")), uni(-1, 1, (3, 3)))
case("solve", lambda b, a, x: b.solve(_spd(b, a), x), uni(-1, 1, (3, 3), (3, 2)))
case("eigh", lambda b, a: b.eigh(b.add(a, b.transpose(a, perm=(1, 0))), lower=True),
     lambda r: [np.diag([1.0, 2.0, 4.0]) + r.uniform(-0.1, 0.1, (3, 3))])
case("svd", lambda b, a: b.svd(a, full_matrices=False)[1],
     lambda r: [np.diag([1.0, 2.0, 4.0]) + r.uniform(-0.1, 0.1, (3, 3))])
case("svd", lambda b, a: (lambda u, s, vt: b.matmul(b.mul(u, b.broadcast(s, shape=(3, 3))),
                                                     vt))(*b.svd(a, full_matrices=False)),
     lambda r: [np.diag([1.0, 2.0, 4.0]) + r.uniform(-0.1, 0.1, (3, 3))], "uv")
case("svdvals", lambda b, a: b.svdvals(a), uni(-1, 1, (3, 2)))
case("qr", lambda b, a: b.qr(a), uni(-1, 1, (4, 3)))

# -- effects, calls, loops ------------------------------------------------------------------------
case("guard", lambda b, x: _guarded(b, x), uni(0.5, 1, (3,)))


def _guarded(b: Builder, x: Value) -> Value:
    b.guard(b.gt(b.sum(x, axes=(0,)), b.const(0.0)), expected=True, kind="bool")
    return b.sin(x)


def _callee() -> Function:
    b = Builder("helper")
    x, y = b.input(type_of(np.zeros(3))), b.input(type_of(np.zeros(3)))
    return b.build([b.mul(b.sin(x), y), b.exp(y)])


case("call", lambda b, x, y: b.call(_callee(), x, y), uni(-1, 1, (3,), (3,)))


def _body() -> Function:
    """``(c, x, w) -> (tanh(c w + x), c x)``."""
    b = Builder("step")
    c, x, w = (b.input(type_of(np.zeros(2))) for _ in range(3))
    nc = b.tanh(b.add(b.mul(c, w), x))
    return b.build([nc, b.mul(c, x)])


def _loop(b: Builder, c: Value, xs: Value, w: Value, reverse: bool = False) -> Any:
    body = _body()
    b.callees[body.name] = body
    op = loop_op(body, [c, xs, w], length=4, carries=1, stacked=1, reverse=reverse)
    b.append(op)
    return op.results


case("loop", _loop, uni(-1, 1, (2,), (4, 2), (2,)))
case("loop", lambda b, c, xs, w: _loop(b, c, xs, w, True), uni(-1, 1, (2,), (4, 2), (2,)),
     "reverse")

if "callback" in OPS:  # (opaque primitives)
    from yota.ir.ops.callback import CALLBACKS

    CALLBACKS["tests.transform_cases.double#0"] = lambda static, xs: [xs[0] * 2.0 + xs[1]]
    case("callback", lambda b, x, y: b.callback(x, y, fn="tests.transform_cases.double#0",
                                                static="", results=[["float64", [3]]]),
         uni(-1, 1, (3,), (3,)))

# ops the transformations refuse, by design, with an error that names them
JVP_REFUSED = {"fused": "fusion runs after differentiation",
               "callback": "an opaque primitive's derivative is its primitive's diffrule"}
VMAP_REFUSED = {"fused": "fusion runs after batching"}


def generic_case(op: str) -> Case:
    """An elementwise op without a case: every operand float, in (0.2, 0.8)."""
    n = OPS[op].nin or 1
    return Case(op, lambda b, *xs: b.emit(op, *xs), uni(0.2, 0.8, *[(2, 3)] * n), "generic")


def cases_of(op: str) -> list[Case]:
    found = [c for c in CASES if c.op == op]
    if found or op in JVP_REFUSED or not OPS[op].elementwise:
        return found
    return [generic_case(op)]
