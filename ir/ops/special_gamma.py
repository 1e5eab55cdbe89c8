"""The gamma function family in the scalar language of ``special_scalar``: ``lgamma``
(``log |Gamma(x)|``, SciPy's ``gammaln``), ``digamma`` and ``polygamma(n, x)`` for
``n >= 1``.

- ``lgamma``: Stirling's series (8 terms) from ``x >= 8``; below, the recurrence
  ``Gamma(x + 1) = x Gamma(x)`` moves ``x`` into ``[1.5, 2.5)`` where
  ``lgamma(z) = (z - 2) R(z)`` (``R`` of degree 17), so the zeros at 1 and 2 keep their
  relative accuracy (``z - 2`` is computed exactly from ``x``); ``x < 0`` by reflection,
  ``log(pi / |sin(pi x)|) - lgamma(1 - x)``, with ``sin(pi x)`` taken at the exact
  ``x - rint(x)``.
- ``digamma``: the asymptotic series (8 terms) from ``x >= 10``; below, the recurrence
  moves ``x`` into ``[1, 2)`` where ``digamma(z) = (z - x0) R(z)`` around the positive
  root ``x0`` (held in two doubles), the shifted terms summed as one fraction; ``x < 0``
  by reflection, ``digamma(1 - x) - pi / tan(pi x)``.
- ``polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x)``: Hurwitz's zeta as the terms
  below a threshold ``M`` and the Euler-Maclaurin tail from there (``M`` and the number
  of tail terms chosen per ``n`` for a relative error below 1e-17); ``x < 0`` by the
  ``n``-th derivative of the reflection formula (a polynomial in ``cot(pi x)``).

Values at poles, zeros and infinities are SciPy's: ``gammaln`` is ``+inf`` at the
poles and ``-inf`` at ``-inf``; ``psi`` is NaN at the negative poles and ``-inf``/
``+inf`` at ``+0``/``-0``; ``polygamma`` is ``(-1)^(n+1) inf`` at every pole.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

from .special_scalar import F, fabs, floor, log, polyval, rint, sin, tan, where

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
DIGAMMA_ROOT = (1.4616321449683622, 9.549995429965697e-17)  # hi + lo
DIGAMMA_ROOT_M1 = (0.46163214496836236, -1.5522348162858677e-17)  # root - 1

LGAMMA_R = (
    2.0962059060600024e-12, -8.867306165956492e-12, 2.8206946487921987e-11,
    -1.2050236137952312e-10, 5.350164231426595e-10, -2.3086641882572558e-09,
    1.0012704932493954e-08, -4.38708276994606e-08, 1.94253158049944e-07,
    -8.716991307145595e-07, 3.981793122286463e-06, -1.8636779703098573e-05,
    9.03284478395594e-05, -0.00046159693930847154, 0.0025726010534729226,
    -0.016838075263298908, 0.1612335167120566, 0.42278433509846713,
)
DIGAMMA_R = (
    -8.25512972008104e-11, 2.4765474440031764e-10, -2.889363639216111e-10,
    8.668257373761658e-10, -3.6788868183645545e-09, 1.10370884388543e-08,
    -3.166618072027162e-08, 9.500926192924096e-08, -2.8628755280038686e-07,
    8.591324222417666e-07, -2.578107848270217e-06, 7.741156881253708e-06,
    -2.325823828431376e-05, 6.995020484160625e-05, -0.00021074841215733007,
    0.000636888028319074, -0.0019350666647832667, 0.005936795278433826,
    -0.018550615381738605, 0.06013562106019355, -0.21181371064073026,
    0.951055876031833,
)


@cache
def bernoulli(k: int) -> Fraction:
    """The Bernoulli number B_k (B_1 = -1/2)."""
    a = [Fraction(0)] * (k + 1)
    for m in range(k + 1):  # Akiyama-Tanigawa
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0] if k != 1 else Fraction(-1, 2)


# Stirling: sum_k B_2k / (2k (2k - 1) x^(2k-1)) = w P(w^2), w = 1/x (highest first)
STIRLING = tuple(float(bernoulli(2 * k) / (2 * k * (2 * k - 1))) for k in range(8, 0, -1))
# digamma: sum_k B_2k / (2k x^2k) = w^2 P(w^2)
DIGAMMA_ASYM = tuple(float(bernoulli(2 * k) / (2 * k)) for k in range(8, 0, -1))


def lgamma_pos(a: F) -> F:
    """``lgamma(a)`` for ``a >= 0`` (``inf`` at 0 and at ``inf``)."""
    big = a >= 8.0
    n = floor(a - 1.5)  # a in [1.5, 8): moved down by n into [1.5, 2.5)
    base = where(a < 0.5, 0.0, where(a < 1.5, 1.0, n + 2.0))
    d = a - base  # z - 2 for the z in [1.5, 2.5), exactly
    core = d * polyval(LGAMMA_R, d * 2.0)
    prod = a.k(1.0)
    for j in range(1, 7):
        prod = prod * where(n >= float(j), a - float(j), 1.0)
    # one logarithm per lane: of a (Stirling), of the shift's product, or of what the
    # upward shift divides by (a, or a (1 + a)), subtracted
    lg = log(where(big, a, where(a < 0.5, a * (a + 1.0), where(a < 1.5, a, prod))))
    small = core + where(a < 1.5, -lg, lg)
    z = where(big, a, 8.0)
    w = 1.0 / z
    stirling = (z - 0.5) * lg - z + HALF_LOG_2PI + w * polyval(STIRLING, w * w)
    return where(a.eq(math.inf), math.inf, where(big, stirling, small))


def lgamma(x: F) -> F:
    neg = x < 0.0
    pos = lgamma_pos(where(neg, 1.0 - x, x))
    r = x - rint(x)
    reflected = log(math.pi / fabs(sin(r * math.pi))) - pos
    return where(x.eq(-math.inf), -math.inf, where(neg, reflected, pos))


def _reciprocal_sum(a: F, n: F, most: int) -> F:
    """``sum_{j=1..n} 1 / (a - j)`` (``n <= most``) as one fraction."""
    num, den = a.k(0.0), a.k(1.0)
    for j in range(1, most + 1):
        use = n >= float(j)
        v = a - float(j)
        num, den = where(use, num * v + den, num), where(use, den * v, den)
    return num / den


def digamma_pos(a: F) -> F:
    """``digamma(a)`` for ``a >= 0`` and ``a = -0.0`` (``-inf`` at ``+0``, ``+inf`` at
    ``-0``)."""
    big = a >= 10.0
    z = where(big, a, 10.0)
    w = 1.0 / z
    w2 = w * w
    asym = log(z) - w * 0.5 - w2 * polyval(DIGAMMA_ASYM, w2)
    n = floor(a - 1.0)  # a in [2, 10): moved down by n into [1, 2)
    low, mid = a < 1.0, a < 2.0
    z1 = where(low, a + 1.0, where(mid, a, a - n))
    root, root_m1 = DIGAMMA_ROOT, DIGAMMA_ROOT_M1
    d = where(low, a - root_m1[0] - root_m1[1], z1 - root[0] - root[1])
    core = d * polyval(DIGAMMA_R, z1 * 2.0 - 3.0)
    shift = where(low, -1.0 / a, where(mid, 0.0, _reciprocal_sum(a, n, 8)))
    return where(big, asym, core + shift)


def digamma(x: F) -> F:
    neg = x < 0.0
    pos = digamma_pos(where(neg, 1.0 - x, x))
    r = x - rint(x)
    reflected = pos - math.pi / tan(r * math.pi)
    return where(neg, where(r.eq(0.0), math.nan, reflected), pos)


# -- polygamma ---------------------------------------------------------------------------
@cache
def _zeta_plan(s: int) -> tuple[int, tuple[float, ...]]:
    """For Hurwitz's zeta(s, x) with integer ``s >= 2``: the threshold ``M`` from which the
    Euler-Maclaurin tail alone is accurate to 1e-17, and the tail's coefficients
    ``B_2j / (2j)! * s (s+1) ... (s+2j-2)`` (highest first)."""
    best: tuple[int, int] | None = None
    for terms in range(4, 16):
        nxt = abs(bernoulli(2 * terms + 2)) / math.factorial(2 * terms + 2) * math.prod(
            range(s, s + 2 * terms + 1)) * (s - 1)
        m = max(1, math.ceil(float(nxt * 10 ** 17) ** (1.0 / (2 * terms + 1))))
        if best is None or m + terms / 3 < best[0] + best[1] / 3:
            best = (m, terms)
    assert best is not None
    m, terms = best
    coefs = tuple(float(bernoulli(2 * j) / math.factorial(2 * j) * math.prod(
        range(s, s + 2 * j - 1))) for j in range(terms, 0, -1))
    return m, coefs


def _pow(x: F, n: int) -> F:
    r: F | None = None
    while n:
        if n & 1:
            r = x if r is None else r * x
        n >>= 1
        if n:
            x = x * x
    assert r is not None
    return r


def hurwitz_zeta_pos(s: int, x: F) -> F:
    """``zeta(s, x)`` for integer ``s >= 2`` and ``x > 0``."""
    m, coefs = _zeta_plan(s)
    total = x.k(0.0)
    for k in range(m):
        xk = x + float(k)
        total = total + where(xk < float(m), _pow(1.0 / xk, s), 0.0)
    w = where(x < float(m), x + floor(float(m) - x), x)  # the first x + k >= m
    w = where(w < float(m), w + 1.0, w)
    v = 1.0 / w
    tail = _pow(v, s) * (w / float(s - 1) + 0.5 + v * polyval(coefs, v * v))
    return total + tail


@cache
def _cot_derivative(n: int) -> tuple[int, ...]:
    """Q_n with d^n/dx^n cot(pi x) = pi^n Q_n(cot(pi x)) (integer coefficients, highest
    first): Q_0(c) = c, Q_{k+1}(c) = -(1 + c^2) Q_k'(c)."""
    q = [0, 1]  # lowest first
    for _ in range(n):
        dq = [i * a for i, a in enumerate(q)][1:] or [0]
        nxt = [0] * (len(dq) + 2)
        for i, a in enumerate(dq):
            nxt[i] -= a
            nxt[i + 2] -= a
        q = nxt
    return tuple(q[::-1])


def polygamma(x: F, n: int) -> F:
    """``polygamma(n, x)`` for ``n >= 1``."""
    s = n + 1
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    scale = sign * math.factorial(n)
    neg = x < 0.0
    a = where(neg, 1.0 - x, x)
    pos = hurwitz_zeta_pos(s, where(a.eq(0.0), 1.0, a)) * scale
    c = 1.0 / tan((x - rint(x)) * math.pi)
    reflected = pos * (-1.0) ** n - polyval(_cot_derivative(n), c) * math.pi ** (n + 1)
    pole = (x <= 0.0) & floor(x).eq(x)
    out = where(pole, sign * math.inf, where(neg, reflected, pos))
    return where(x.eq(math.inf), sign * 0.0, out)
