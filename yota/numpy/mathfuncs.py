"""More of NumPy's real-valued math: inverse hyperbolics, ``exp2``, ``logaddexp``,
``hypot``, NaN-ignoring ``fmax``/``fmin``, ``fabs``, ``sinc``, degree conversions,
``nan_to_num``, ``copysign``, ``heaviside``, ``cbrt``, ``trunc``/``fix``, ``ldexp``,
``float_power``, ``fmod`` and the complex-number accessors on real input.

Each is a composition of IR ops, written so that no branch ever computes 0/0 or inf-inf
that a ``select`` would then discard: such a branch would still pass a NaN to the
gradient (the cotangent 0 times an infinite derivative). Where a function has a kink
its gradient there is the one the composition gives (``hypot`` at the origin: 0,
``copysign`` at 0: that of ``abs``, 0).

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sum(np.arcsinh(x)), np.array([0.0, 3.0]))
    >>> np.allclose(g[0], 1 / np.sqrt(1 + np.array([0.0, 3.0]) ** 2))
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.types import TensorType

from .registry import LoweringContext, register

_BIG = 2.0 ** 28  # beyond it, x**2 + 1 == x**2 in float64: asinh/acosh as log(2x)


class _Ops:
    """Short spellings of IR ops on values of one type ``t``."""

    def __init__(self, b: Builder, t: TensorType) -> None:
        self.b, self.t = b, t

    def c(self, v: float) -> Value:
        return self.b.const(v, self.t.dtype, self.t.shape)

    def __getattr__(self, op: str) -> Callable[..., Value]:
        return lambda *xs: self.b.emit(op, *xs)

    def where(self, cond: Value, a: Value, b: Value) -> Value:
        return self.b.emit("select", cond, a, b)

    def either(self, a: Value, b: Value) -> Value:
        return self.b.emit("or", a, b)


def _unary(name: str, np_fn: Any, body: Callable[[_Ops, Value], Value]) -> None:
    def lower(L: LoweringContext, outs: list[TensorType], x: Any, **kw: Any) -> Value:
        o = outs[0]
        return body(_Ops(L.b, o), L.operand(x, o.dtype, o.shape))

    register(name, np_fn, np_fn)(lower)


def _binary(name: str, np_fn: Any, body: Callable[[_Ops, Value, Value], Value]) -> None:
    def lower(L: LoweringContext, outs: list[TensorType], x: Any, y: Any, **kw: Any) -> Value:
        o = outs[0]
        return body(_Ops(L.b, o), L.operand(x, o.dtype, o.shape), L.operand(y, o.dtype, o.shape))

    register(name, np_fn, np_fn)(lower)


def _odd(m: _Ops, x: Value, f: Callable[[Value], Value]) -> Value:
    """An odd function from its values on t >= 0: f sees |x| only (by a select, so the
    derivative at 0 is f'(0), not 0 as through abs)."""
    neg = m.lt(x, m.c(0.0))
    r = f(m.where(neg, m.neg(x), x))
    return m.where(neg, m.neg(r), r)


def _asinh(m: _Ops, x: Value) -> Value:
    def pos(t: Value) -> Value:
        big = m.gt(t, m.c(_BIG))
        small = m.where(big, m.c(1.0), t)  # the large branch never squares a huge t
        s2 = m.square(small)
        near = m.log1p(m.add(small, m.div(s2, m.add(m.c(1.0), m.sqrt(m.add(m.c(1.0), s2))))))
        far = m.add(m.log(m.where(big, t, m.c(1.0))), m.c(math.log(2.0)))
        return m.where(big, far, near)

    return _odd(m, x, pos)


def _acosh(m: _Ops, x: Value) -> Value:
    big = m.gt(x, m.c(_BIG))
    small = m.where(big, m.c(1.0), x)
    t = m.sub(small, m.c(1.0))  # log1p(t + sqrt(t (t + 2))): exact near x = 1
    near = m.log1p(m.add(t, m.sqrt(m.mul(t, m.add(t, m.c(2.0))))))
    far = m.add(m.log(m.where(big, x, m.c(1.0))), m.c(math.log(2.0)))
    return m.where(m.lt(x, m.c(1.0)), m.c(np.nan), m.where(big, far, near))  # x < 1: NaN


def _atanh(m: _Ops, x: Value) -> Value:
    return _odd(m, x, lambda t: m.mul(m.c(0.5), m.log1p(m.div(m.mul(m.c(2.0), t),
                                                             m.sub(m.c(1.0), t)))))


def _logaddexp(m: _Ops, x: Value, y: Value, log1p_exp_neg: Callable[[Value], Value],
               tie: float) -> Value:
    """max + log1p(exp(-|x - y|)); equal arguments (infinities too) give max + log(2)."""
    hi = m.maximum(x, y)
    same = m.eq(x, y)
    d = m.where(same, m.c(1.0), m.sub(hi, m.minimum(x, y)))  # >= 0, never inf - inf
    return m.where(same, m.add(hi, m.c(tie)), m.add(hi, log1p_exp_neg(d)))


def _hypot(m: _Ops, x: Value, y: Value) -> Value:
    """s * sqrt(1 + (r/s)^2) with s = max(|x|, |y|): no overflow, 0 at the origin (and
    its gradient 0 there); an infinite argument gives inf even beside a NaN, as NumPy."""
    ax, ay = m.abs(x), m.abs(y)
    s, r = m.maximum(ax, ay), m.minimum(ax, ay)
    inf = m.either(m.isinf(ax), m.isinf(ay))
    degenerate = m.either(m.eq(s, m.c(0.0)), inf)
    safe = m.where(degenerate, m.c(1.0), s)
    q = m.div(m.where(degenerate, m.c(0.0), r), safe)
    h = m.mul(safe, m.sqrt(m.add(m.c(1.0), m.square(q))))
    return m.where(inf, m.c(np.inf), m.where(degenerate, s, h))


def _fchoose(pick: str) -> Callable[[_Ops, Value, Value], Value]:
    """fmax/fmin: maximum/minimum, except that a NaN loses to a number."""
    def body(m: _Ops, x: Value, y: Value) -> Value:
        return m.where(m.isnan(y), x, m.where(m.isnan(x), y, m.b.emit(pick, x, y)))

    return body


def _sinc(m: _Ops, x: Value) -> Value:
    zero = m.eq(x, m.c(0.0))
    px = m.mul(m.c(math.pi), m.where(zero, m.c(1.0), x))
    return m.where(zero, m.c(1.0), m.div(m.sin(px), px))


def _copysign(m: _Ops, x: Value, y: Value) -> Value:
    """|x| with the sign of y, -0.0 counting as negative (1/y < 0); a NaN y counts as
    positive whatever its sign bit (the IR has no sign-bit test)."""
    negative = m.either(m.lt(y, m.c(0.0)),
                        m.b.emit("and", m.eq(y, m.c(0.0)),
                                 m.lt(m.div(m.c(1.0), m.where(m.eq(y, m.c(0.0)), y,
                                                              m.c(1.0))), m.c(0.0))))
    ax = m.abs(x)
    return m.where(negative, m.neg(ax), ax)


def _fmod(m: _Ops, x: Value, y: Value) -> Value:
    """C's remainder (np.fmod: the sign of the dividend). For x, y >= 0 it is the floor
    remainder (``mod``), so |x| mod |y| given x's sign is exact: no quotient is rounded,
    where ``x - trunc(x / y) * y`` would be wrong for large quotients. Its gradients
    follow: 1 for x, -trunc(x / y) for y."""
    r = m.mod(m.abs(x), m.abs(y))
    if m.t.dtype.kind != "f":
        return m.where(m.lt(x, m.c(0)), m.neg(r), r)
    return _copysign(m, r, x)


def _heaviside(m: _Ops, x: Value, h0: Value) -> Value:
    step = m.where(m.lt(x, m.c(0.0)), m.c(0.0), m.where(m.gt(x, m.c(0.0)), m.c(1.0), h0))
    return m.where(m.isnan(x), x, step)


def _cbrt(m: _Ops, x: Value) -> Value:
    def pos(t: Value) -> Value:
        zero = m.eq(t, m.c(0.0))  # t ** (1/3) at 0: its gradient would be inf * 0
        r = m.pow(m.where(zero, m.c(1.0), t), m.c(1.0 / 3.0))
        return m.where(zero, t, r)

    return _odd(m, x, pos)


def _trunc(m: _Ops, x: Value) -> Value:
    return m.where(m.lt(x, m.c(0.0)), m.ceil(x), m.floor(x))


def _same(m: _Ops, x: Value) -> Value:
    return x


def _radians(m: _Ops, x: Value) -> Value:
    return m.mul(x, m.c(math.pi / 180.0))


def _degrees(m: _Ops, x: Value) -> Value:
    return m.mul(x, m.c(180.0 / math.pi))


for _name, _fn, _body in [
    ("arcsinh", np.arcsinh, _asinh), ("arccosh", np.arccosh, _acosh),
    ("arctanh", np.arctanh, _atanh), ("sinc", np.sinc, _sinc), ("cbrt", np.cbrt, _cbrt),
    ("trunc", np.trunc, _trunc), ("fix", np.fix, _trunc),
    ("fabs", np.fabs, lambda m, x: m.abs(x)),
    ("deg2rad", np.deg2rad, _radians), ("radians", np.radians, _radians),
    ("rad2deg", np.rad2deg, _degrees), ("degrees", np.degrees, _degrees),
    ("exp2", np.exp2, lambda m, x: m.pow(m.c(2.0), x)),
    ("real", np.real, _same), ("conj", np.conj, _same), ("conjugate", np.conjugate, _same),
    ("real_if_close", np.real_if_close, _same),
    ("imag", np.imag, lambda m, x: m.c(0.0)),
    ("angle", np.angle, lambda m, x: m.arctan2(m.c(0.0), x)),
]:
    _unary(_name, _fn, _body)

for _name, _fn, _body2 in [
    ("logaddexp", np.logaddexp,
     lambda m, x, y: _logaddexp(m, x, y, lambda d: m.log1p(m.exp(m.neg(d))), math.log(2.0))),
    ("logaddexp2", np.logaddexp2,
     lambda m, x, y: _logaddexp(m, x, y, lambda d: m.div(
         m.log1p(m.pow(m.c(2.0), m.neg(d))), m.c(math.log(2.0))), 1.0)),
    ("hypot", np.hypot, _hypot), ("fmax", np.fmax, _fchoose("maximum")),
    ("fmin", np.fmin, _fchoose("minimum")), ("copysign", np.copysign, _copysign),
    ("heaviside", np.heaviside, _heaviside), ("fmod", np.fmod, _fmod),
    ("float_power", np.float_power, lambda m, x, y: m.pow(x, y)),
]:
    _binary(_name, _fn, _body2)


@register("ldexp", np.ldexp, np.ldexp)
def _ldexp(L: LoweringContext, outs: list[TensorType], x: Any, i: Any, **kw: Any) -> Value:
    o = outs[0]
    m = _Ops(L.b, o)
    return m.mul(L.operand(x, o.dtype, o.shape), m.pow(m.c(2.0), L.operand(i, o.dtype, o.shape)))


@register("nan_to_num", np.nan_to_num, np.nan_to_num)
def _nan_to_num(L: LoweringContext, outs: list[TensorType], x: Any, copy: bool = True,
                nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> Value:
    o = outs[0]
    v = L.operand(x, o.dtype, o.shape)
    if o.dtype.kind != "f":
        return v
    m = _Ops(L.b, o)
    big = float(np.finfo(o.dtype).max)
    hi = m.c(big if posinf is None else posinf)
    lo = m.c(-big if neginf is None else neginf)
    inf = m.isinf(v)
    out = m.where(m.either(m.isnan(v), inf), m.where(m.isnan(v), m.c(nan),
                                                      m.where(m.gt(v, m.c(0.0)), hi, lo)), v)
    return out
