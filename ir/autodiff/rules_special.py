"""Derivative rules of the special functions (``yota.ir.ops.special``).

Each derivative is itself made of special ops with rules of their own, so gradients of
any order exist: ``lgamma' = digamma``, ``digamma' = polygamma(1)``, ``polygamma(n)' =
polygamma(n + 1)``, ``erf' = 2/sqrt(pi) exp(-x^2)``, ``erfcx' = 2 x erfcx - 2/sqrt(pi)``,
``erfinv' = sqrt(pi)/2 exp(erfinv^2)``, ``i0' = i1``, ``i1' = i0 - i1/x`` (1/2 at 0),
and the scaled Bessel functions' ``i0e' = i1e - sign(x) i0e``,
``i1e' = i0e - i1e/x - sign(x) i1e``.
"""

from __future__ import annotations

import math

from ..core import Builder, Op, Value
from .helpers import full_like, scale
from .registry import Grads, Rule

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _x(op: Op) -> Value:
    return op.operands[0]


def _times(f: str, **attrs: int) -> Rule:
    """``dy * f(x)``."""
    return lambda b, op, dy: [b.mul(dy, b.emit(f, _x(op), **attrs))]


def _polygamma(b: Builder, op: Op, dy: Value) -> Grads:
    return [b.mul(dy, b.emit("polygamma", _x(op), n=op.attrs["n"] + 1))]


def _gauss(b: Builder, x: Value) -> Value:
    """``2/sqrt(pi) exp(-x^2)``."""
    return scale(b, b.exp(b.neg(b.square(x))), _TWO_OVER_SQRT_PI)


def _erfcx(b: Builder, op: Op, dy: Value) -> Grads:
    x, y = _x(op), op.result
    d = b.sub(scale(b, b.mul(x, y), 2.0), full_like(b, x, _TWO_OVER_SQRT_PI))
    return [b.mul(dy, d)]


def _inverse(sign: float) -> Rule:
    """erfinv and erfcinv: ``+-sqrt(pi)/2 exp(y^2)`` at the result ``y``."""
    def rule(b: Builder, op: Op, dy: Value) -> Grads:
        d = scale(b, b.exp(b.square(op.result)), sign * math.sqrt(math.pi) / 2.0)
        return [b.mul(dy, d)]

    return rule


def _i1_over_x(b: Builder, x: Value, y: Value) -> Value:
    """``y / x`` (``y`` is ``i1(x)`` or ``i1e(x)``), with its limit 1/2 at ``x = 0``."""
    zero = b.eq(x, full_like(b, x, 0.0))
    safe = b.select(zero, full_like(b, x, 1.0), x)
    return b.select(zero, full_like(b, x, 0.5), b.div(y, safe))


def _i1(b: Builder, op: Op, dy: Value) -> Grads:
    x = _x(op)
    return [b.mul(dy, b.sub(b.emit("i0", x), _i1_over_x(b, x, op.result)))]


def _i0e(b: Builder, op: Op, dy: Value) -> Grads:
    x = _x(op)
    return [b.mul(dy, b.sub(b.emit("i1e", x), b.mul(b.sign(x), op.result)))]


def _i1e(b: Builder, op: Op, dy: Value) -> Grads:
    x, y = _x(op), op.result
    d = b.sub(b.sub(b.emit("i0e", x), _i1_over_x(b, x, y)), b.mul(b.sign(x), y))
    return [b.mul(dy, d)]


RULES_SPECIAL: dict[str, Rule] = {
    "lgamma": _times("digamma"),
    "digamma": _times("polygamma", n=1),
    "polygamma": _polygamma,
    "erf": lambda b, op, dy: [b.mul(dy, _gauss(b, _x(op)))],
    "erfc": lambda b, op, dy: [b.neg(b.mul(dy, _gauss(b, _x(op))))],
    "erfcx": _erfcx,
    "erfinv": _inverse(1.0),
    "erfcinv": _inverse(-1.0),
    "i0": _times("i1"),
    "i0e": _i0e,
    "i1": _i1,
    "i1e": _i1e,
}
