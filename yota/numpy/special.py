"""``scipy.special`` on traced arrays, and ``np.i0``.

SciPy's special functions are NumPy ufuncs, so a traced argument reaches the tracer's
``__array_ufunc__``; ``registry.resolve_ufunc`` maps a ufunc of ``scipy.special`` to the
entry ``scipy.special.<name>`` here (the tape and errors name it so). Nothing here
imports SciPy: the entries are found by name, and only a program that called SciPy can
contain them. The Python-level functions of ``scipy.special`` (``logsumexp``,
``softmax``, ``log_softmax``, ``polygamma``, ``multigammaln``) reach their entries in
``special_api`` through ``scipy_api``, which intercepts them while a trace runs.

Functions that need a new primitive are the special ops of the IR (``lgamma``,
``digamma``, ``polygamma``, ``erf``, ``erfc``, ``erfcx``, ``erfinv``, ``erfcinv``,
``i0``, ``i0e``, ``i1``, ``i1e``: native on every backend, with derivative rules).
The others are compositions, written in the scalar language of the special ops
(``yota.ir.ops.special_scalar``) over IR values, in numerically stable forms and with
SciPy's values at the edges (``xlogy(0, 0) = 0``, ``entr(x < 0) = -inf``, ``huber``
with a negative ``delta`` is ``inf``...). A branch that ``where`` discards never sees
arguments that would make it infinite or NaN: its gradient is multiplied by zero, and
zero times infinity would still be NaN.

    >>> import numpy as np, yota
    >>> _, g = yota.grad(lambda x: np.sum(np.i0(x)), np.array([0.0, 1.0]))
    >>> [round(float(v), 6) for v in g]  # i0' = i1
    [0.0, 0.565159]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.errors import UnsupportedError
from yota.ir.ops.special_gamma import STIRLING
from yota.ir.ops.special_scalar import (
    B,
    F,
    exp,
    fabs,
    floor,
    isnan,
    log,
    log1p,
    polyval,
    rint,
    where,
)
from yota.ir.types import TensorType

from ..userloc import where as user_line
from .registry import LoweringContext, register

SQRT1_2 = math.sqrt(0.5)


class IREmit:
    """The scalar language on IR values of one type (the op's result type)."""

    _UNARY = {"rint": "round"}

    def __init__(self, b: Builder, t: TensorType) -> None:
        self.b, self.t = b, t

    def const(self, v: float) -> Value:
        return self.b.const(v, self.t.dtype, self.t.shape)

    def unary(self, name: str, a: Value) -> Value:
        return self.b.emit(self._UNARY.get(name, name), a)

    def binary(self, name: str, a: Value, b: Value) -> Value:
        return self.b.emit(name, a, b)

    compare = binary

    def logic(self, name: str, a: Value, b: Value | None) -> Value:
        return self.b.emit("not", a) if b is None else self.b.emit(name, a, b)

    def select(self, c: Value, a: Value, b: Value) -> Value:
        return self.b.emit("select", c, a, b)

    def isnan(self, a: Value) -> Value:
        return self.b.emit("isnan", a)


def op(name: str, x: F, **attrs: Any) -> F:
    """The IR op ``name`` (a special function) on ``x``."""
    e = x.e
    assert isinstance(e, IREmit)
    return F(e, e.b.emit(name, x.v, **attrs))


def operands(L: LoweringContext, out: TensorType, *args: Any) -> list[F]:
    """``args`` as values of the result type (converted and broadcast)."""
    if out.dtype.kind != "f":
        raise UnsupportedError(f"scipy.special at {user_line()}: complex and integer "
                               f"results ({out.dtype}) are not supported on traced arrays")
    e = IREmit(L.b, out)
    return [F(e, L.operand(a, out.dtype, out.shape)) for a in args]


Body = Callable[..., F]


def ufunc(name: str, body: Body, wide: bool = False) -> None:
    """Register ``scipy.special.<name>`` (a ufunc of ``len(args)`` operands) as ``body``;
    ``wide``: a float32 result is computed in float64 and rounded once, as SciPy's float32
    loops do (a composition such as ``ndtr`` magnifies float32 rounding: 2e-6 at -6.5)."""
    def lower(L: LoweringContext, outs: list[TensorType], *args: Any, **kw: Any) -> Value:
        out = outs[0]
        if not (wide and out.dtype == np.float32):
            return body(*operands(L, out, *args)).v
        r = body(*operands(L, out.with_dtype(np.dtype(np.float64)), *args)).v
        return L.b.convert_to(r, out.dtype)

    register(f"scipy.special.{name}", scipy_forward(name))(lower)


def scipy_forward(name: str) -> Callable[..., Any]:
    """SciPy's own function (for the example values while tracing), found when called."""
    def forward(*args: Any, **kw: Any) -> Any:
        import scipy.special  # only reached from a program that called SciPy

        return getattr(scipy.special, name)(*args, **kw)

    return forward


# -- the special ops themselves -------------------------------------------------------------
for _name, _op in [("gammaln", "lgamma"), ("psi", "digamma"), ("erf", "erf"),
                   ("erfc", "erfc"), ("erfcx", "erfcx"), ("erfinv", "erfinv"),
                   ("erfcinv", "erfcinv"), ("i0", "i0"), ("i0e", "i0e"), ("i1", "i1"),
                   ("i1e", "i1e")]:
    ufunc(_name, lambda x, _op=_op: op(_op, x))


@register("i0", np.i0, np.i0)
def _np_i0(L: LoweringContext, outs: list[TensorType], x: Any) -> Value:
    return op("i0", operands(L, outs[0], x)[0]).v


# -- compositions ------------------------------------------------------------------------------
def _minus_abs(x: F) -> F:
    """``-|x|`` by a select (its derivative at 0 is -1 from the right, not 0)."""
    return where(x >= 0.0, -x, x)


def expit(x: F) -> F:
    e = exp(_minus_abs(x))  # never overflows
    return where(x >= 0.0, 1.0 / (e + 1.0), e / (e + 1.0))


def log_expit(x: F) -> F:
    return where(x < 0.0, x, 0.0) - log1p(exp(_minus_abs(x)))


def logit(p: F) -> F:
    """As SciPy: ``log1p((2p - 1) / (1 - p))`` on (0.3, 0.65), ``log(p / (1 - p))`` else."""
    mid = (p > 0.3) & (p < 0.65)
    m = where(mid, p, 0.5)
    o = where(mid, 0.5, p)
    return where(mid, log1p((m * 2.0 - 1.0) / (1.0 - m)), log(o / (1.0 - o)))


def _xlog(x: F, y: F, f: Callable[[F], F], lo: float) -> F:
    """``x f(y)``, 0 where ``x == 0`` and ``y`` is not NaN (``y`` is kept where ``f(y)`` is
    finite, so the gradient there is still ``f(y)``)."""
    zero = x.eq(0.0) & ~isnan(y)
    ok = (y > lo) & (y < math.inf)
    return x * f(where(zero & ~ok, 1.0, y))


def xlogy(x: F, y: F) -> F:
    return _xlog(x, y, log, 0.0)


def xlog1py(x: F, y: F) -> F:
    return _xlog(x, y, log1p, -1.0)


def entr(x: F) -> F:
    s = where(x > 0.0, x, 1.0)
    r = where(x > 0.0, -(s * log(s)), where(x.eq(0.0), 0.0, -math.inf))
    return where(isnan(x), x, r)


def _relative(x: F, y: F, extra: bool) -> F:
    """``rel_entr`` and (``extra``) ``kl_div``: SciPy's cases in SciPy's order."""
    ok = (x > 0.0) & (y > 0.0)
    xs, ys = where(ok, x, 1.0), where(ok, y, 1.0)
    v = xs * log(xs / ys)
    if extra:
        v = v - xs + ys
    zero = x.eq(0.0) & (y >= 0.0)
    r = where(ok, v, where(zero, y if extra else 0.0, math.inf))
    return where(isnan(x) | isnan(y), x + y, r)


def huber(delta: F, r: F) -> F:
    a = fabs(r)
    return where(delta < 0.0, math.inf, where(a <= delta, r * r * 0.5,
                                               delta * (a - delta * 0.5)))


def pseudo_huber(delta: F, r: F) -> F:
    """``delta^2 (sqrt(1 + (r/delta)^2) - 1)`` as ``delta^2 expm1(log1p((r/delta)^2)/2)``
    (no cancellation for small ``r``); 0 where ``delta`` or ``r`` is 0."""
    zero = delta.eq(0.0) | r.eq(0.0)
    d = where(zero, 1.0, delta)
    v = r / d
    value = d * d * op("expm1", log1p(v * v) * 0.5)
    return where(delta < 0.0, math.inf, where(zero, 0.0, value))


def _tail(a: F) -> F:
    """``ndtr(-a)`` for ``a >= 1``: ``exp(-a^2/2) erfcx(a/sqrt 2)/2``, ``a^2`` split exactly
    (``m``, a multiple of 1/128, has an exact square), so the rounding of ``a/sqrt 2`` is
    not magnified ``a^2`` times as in ``erfc(a/sqrt 2)`` (SciPy's ``ndtr(-37)``: 580 ulps)."""
    a = where(a > 40.0, 40.0, a)  # ndtr underflows to 0 before -38.5
    m = rint(a * 128.0) / 128.0
    e = exp(m * m * -0.5) * exp((a - m) * (a + m) * -0.5)
    return e * op("erfcx", a * SQRT1_2) * 0.5


def _middle(x: F, near: B) -> F:
    """``ndtr(x)`` for ``|x| < 1`` (as Cephes: ``(1 + erf(x/sqrt 2))/2``)."""
    return op("erf", where(near, x, 0.0) * SQRT1_2) * 0.5 + 0.5


def ndtr(x: F) -> F:
    near, low, high = fabs(x) < 1.0, x <= -1.0, x >= 1.0
    lower = _tail(where(low, -x, 1.0))
    upper = 1.0 - _tail(where(high, x, 1.0))
    return where(near, _middle(x, near), where(low, lower, where(isnan(x), x, upper)))


def log_ndtr(x: F) -> F:
    """``log(ndtr(x))``: ``log(erfcx(-x/sqrt 2)/2) - x^2/2`` below -1 (no underflow however
    far out), ``log1p(-ndtr(-x))`` above 1 (SciPy's ``-ndtr(-x)`` beyond 6 is 5e-10 off at
    6), the log of ``ndtr`` between."""
    near, low, high = fabs(x) < 1.0, x <= -1.0, x >= 1.0
    xn = where(low, x, -1.0)
    lower = log(op("erfcx", xn * -SQRT1_2) * 0.5) - xn * xn * 0.5
    upper = log1p(-_tail(where(high, x, 1.0)))
    return where(near, log(_middle(x, near)), where(low, lower, where(isnan(x), x, upper)))


def ndtri(p: F) -> F:
    return op("erfcinv", p * 2.0) * -math.sqrt(2.0)


def loggamma(x: F) -> F:
    return where(x < 0.0, math.nan, op("lgamma", x))


def _betaln(a: F, b: F) -> F:
    """``lgamma(a) + lgamma(b) - lgamma(a + b)``; where the larger argument ``h`` and the
    sum ``h + l`` are at least 8, ``lgamma(l) - (lgamma(h + l) - lgamma(h))``
    with the difference from Stirling's series, ``(h - 1/2) log1p(l/h) + l log(h + l) - l
    + S(h + l) - S(h)``: no two large ``lgamma`` cancel (SciPy loses up to 1e-11 there)."""
    h, lo = where(a > b, a, b), where(a > b, b, a)
    far = (h >= 8.0) & (h + lo >= 8.0)
    hf, lf = where(far, h, 8.0), where(far, lo, 1.0)
    d = ((hf - 0.5) * log1p(lf / hf) + lf * log(hf + lf) - lf
         + _stirling_tail(hf + lf) - _stirling_tail(hf))
    near = op("lgamma", where(far, 1.0, a)) + op("lgamma", where(far, 2.0, b)) \
        - op("lgamma", where(far, 3.0, a + b))
    value = where(far, op("lgamma", lf) - d, near)
    return where(h.eq(math.inf) & (lo < math.inf), -math.inf, value)


def _stirling_tail(z: F) -> F:
    """``lgamma(z) - ((z - 1/2) log z - z + log(2 pi)/2)`` for ``z >= 8``."""
    w = 1.0 / z
    return w * polyval(STIRLING, w * w)


def betaln(a: F, b: F) -> F:
    """As SciPy, with a non-positive integer argument ``m`` (a pole): ``lbeta(1 - m - n,
    n)`` when the other argument ``n`` is a positive integer with ``1 - m - n > 0``, else
    ``inf``."""
    na = (a <= 0.0) & floor(a).eq(a)
    nb = (b <= 0.0) & floor(b).eq(b) & ~na
    pole = na | nb
    other = where(na, b, a)
    ok = (other > 0.0) & floor(other).eq(other) & (other < math.inf) & (1.0 - a - b > 0.0)
    inf = pole & ~ok
    pa = where(inf, 2.0, where(pole, 1.0 - a - b, a))
    pb = where(inf, 3.0, where(pole, other, b))
    return where(inf, math.inf, _betaln(pa, pb))


def rel_entr(x: F, y: F) -> F:
    return _relative(x, y, False)


def kl_div(x: F, y: F) -> F:
    return _relative(x, y, True)


COMPOSITIONS: dict[str, Body] = {
    "expit": expit, "log_expit": log_expit, "logit": logit, "xlogy": xlogy,
    "xlog1py": xlog1py, "entr": entr, "rel_entr": rel_entr, "kl_div": kl_div,
    "huber": huber, "pseudo_huber": pseudo_huber, "ndtr": ndtr, "log_ndtr": log_ndtr,
    "ndtri": ndtri, "loggamma": loggamma, "betaln": betaln}
for _name, _body in COMPOSITIONS.items():
    ufunc(_name, _body, wide=True)
