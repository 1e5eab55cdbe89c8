"""Derivative rules of elementwise ops (operands share one type; broadcasting is explicit)."""

from __future__ import annotations

import math

from ..core import Builder, Op, Value
from .helpers import add, full_like, scale
from .registry import Grads, Rule


def _x(op: Op) -> Value:
    return op.operands[0]


def _one_plus(b: Builder, x: Value) -> Value:
    return add(b, x, full_like(b, x, 1.0))


def _one_minus(b: Builder, x: Value) -> Value:
    return b.sub(full_like(b, x, 1.0), x)


def _neg(b: Builder, op: Op, dy: Value) -> Grads:
    return [b.neg(dy)]


def _add(b: Builder, op: Op, dy: Value) -> Grads:
    return [dy, dy]


def _sub(b: Builder, op: Op, dy: Value) -> Grads:
    return [dy, b.neg(dy)]


def _mul(b: Builder, op: Op, dy: Value) -> Grads:
    x, y = op.operands
    return [b.mul(dy, y), b.mul(dy, x)]


def _div(b: Builder, op: Op, dy: Value) -> Grads:
    y = op.operands[1]
    dx = b.div(dy, y)
    return [dx, b.neg(b.mul(dx, op.result))]


def _pow(b: Builder, op: Op, dy: Value) -> Grads:
    # JAX's conventions: no base gradient where p == 0, no exponent gradient where x == 0.
    x, p = op.operands
    zero = full_like(b, x, 0.0)
    dx = b.mul(b.mul(dy, p), b.pow(x, b.sub(p, full_like(b, p, 1.0))))
    safe_x = b.select(b.eq(x, zero), full_like(b, x, 1.0), x)
    dp = b.mul(b.mul(dy, op.result), b.log(safe_x))
    return [b.select(b.eq(p, zero), zero, dx), dp]


def _mod(b: Builder, op: Op, dy: Value) -> Grads:
    x, y = op.operands
    return [dy, b.neg(b.mul(dy, b.floor(b.div(x, y))))]


def _arctan2(b: Builder, op: Op, dy: Value) -> Grads:
    # 0 at the origin, where the gradient is undefined (the odd-symmetric choice, as for
    # abs and norms); the denominator is made safe there so that no 0/0 appears in any order
    x, y = op.operands
    den = add(b, b.square(x), b.square(y))
    zero = full_like(b, den, 0.0)
    r = b.div(dy, b.select(b.eq(den, zero), full_like(b, den, 1.0), den))
    return [b.mul(r, y), b.neg(b.mul(r, x))]


def _chooser(wins: str) -> Rule:
    """maximum/minimum: ``dy`` to the winner, half to each where tied (JAX's rule)."""
    def rule(b: Builder, op: Op, dy: Value) -> Grads:
        x, y = op.operands
        tied = b.select(b.eq(x, y), scale(b, dy, 0.5), full_like(b, dy, 0.0))
        return [b.select(b.emit(wins, x, y), dy, tied), b.select(b.emit(wins, y, x), dy, tied)]

    return rule


def _select(b: Builder, op: Op, dy: Value) -> Grads:
    c = op.operands[0]
    zero = full_like(b, dy, 0.0)
    return [None, b.select(c, dy, zero), b.select(c, zero, dy)]


def _convert(b: Builder, op: Op, dy: Value) -> Grads:
    return [b.convert_to(dy, _x(op).dtype)]


def _sqrt_1m_x2(b: Builder, x: Value) -> Value:
    return b.sqrt(_one_minus(b, b.square(x)))


RULES_ELEMENTWISE: dict[str, Rule] = {
    "neg": _neg,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "mod": _mod,
    "arctan2": _arctan2,
    "maximum": _chooser("gt"),
    "minimum": _chooser("lt"),
    "select": _select,
    "convert": _convert,
    "exp": lambda b, op, dy: [b.mul(dy, op.result)],
    "expm1": lambda b, op, dy: [b.mul(dy, _one_plus(b, op.result))],
    "log": lambda b, op, dy: [b.div(dy, _x(op))],
    "log1p": lambda b, op, dy: [b.div(dy, _one_plus(b, _x(op)))],
    "log2": lambda b, op, dy: [b.div(dy, scale(b, _x(op), math.log(2.0)))],
    "sqrt": lambda b, op, dy: [b.div(dy, scale(b, op.result, 2.0))],
    "reciprocal": lambda b, op, dy: [b.neg(b.mul(dy, b.square(op.result)))],
    "square": lambda b, op, dy: [b.mul(dy, scale(b, _x(op), 2.0))],
    "abs": lambda b, op, dy: [b.mul(dy, b.sign(_x(op)))],
    "sin": lambda b, op, dy: [b.mul(dy, b.cos(_x(op)))],
    "cos": lambda b, op, dy: [b.neg(b.mul(dy, b.sin(_x(op))))],
    "tan": lambda b, op, dy: [b.mul(dy, _one_plus(b, b.square(op.result)))],
    "tanh": lambda b, op, dy: [b.mul(dy, _one_minus(b, b.square(op.result)))],
    "sinh": lambda b, op, dy: [b.mul(dy, b.cosh(_x(op)))],
    "cosh": lambda b, op, dy: [b.mul(dy, b.sinh(_x(op)))],
    "arctan": lambda b, op, dy: [b.div(dy, _one_plus(b, b.square(_x(op))))],
    "arcsin": lambda b, op, dy: [b.div(dy, _sqrt_1m_x2(b, _x(op)))],
    "arccos": lambda b, op, dy: [b.neg(b.div(dy, _sqrt_1m_x2(b, _x(op))))],
}
