"""Modified Bessel functions of the first kind, orders 0 and 1, in the scalar language
of ``special_scalar``: ``i0``, ``i1`` and their exponentially scaled forms ``i0e``
(``exp(-|x|) i0(x)``) and ``i1e``.

Up to ``|x| = 10``, the power series in ``u = x^2 / 4`` (``sum u^k / (k!)^2`` and
``x/2 sum u^k / (k! (k+1)!)``, 24 terms: all positive, so accurate to rounding
everywhere); beyond, ``sqrt(x) i0e(x)`` and ``sqrt(x) i1e(x)`` as polynomials of degree
18 in ``w = 10 / |x|`` (fitted by ``tools/fit_specfun.py``). One Horner evaluation per
lane, its coefficients picked by range. As SciPy (Cephes), ``i0`` and ``i1`` are NaN at
``+-inf`` and overflow to ``inf`` where ``exp(|x|)`` does.
"""

from __future__ import annotations

import math

from .special_scalar import B, F, exp, fabs, polyval_pieces, sqrt, where

BIG = 10.0
I0_SERIES = tuple(1.0 / math.factorial(k) ** 2 for k in range(23, -1, -1))
I1_SERIES = tuple(1.0 / (math.factorial(k) * math.factorial(k + 1)) for k in range(23, -1, -1))
I0E_TAIL = (
    -7.52970537664953e-12, -1.107344202819603e-11, 3.7010816505548113e-11,
    7.549114746721414e-11, -4.5908972013555475e-11, -2.1367508630315678e-10,
    -1.4394783886376294e-10, 1.3283577645433696e-10, 3.8782776677019284e-10,
    6.409332329296529e-10, 1.2763487323926524e-09, 3.557772513716991e-09,
    1.3635690030104275e-08, 7.078421516134878e-08, 5.041257226470597e-07,
    5.152033939215807e-06, 8.311327263761325e-05, 0.0026458859671864045,
    0.4015097608312065,
)
I1E_TAIL = (
    7.986183639842069e-12, 1.1322443361738809e-11, -3.97602913431988e-11,
    -7.800848826166711e-11, 5.220011271835057e-11, 2.2437870344587006e-10,
    1.4437177222196234e-10, -1.4664672212064407e-10, -4.127501954009422e-10,
    -6.866077759916361e-10, -1.3916411638660734e-09, -3.963371394849892e-09,
    -1.5598720851643744e-08, -8.389663534671372e-08, -6.294296081038017e-07,
    -7.012361301771376e-06, -0.00013480146633829978, -0.007730905126756133,
    0.39133972251206706,
)


def _parts(x: F, series: tuple[float, ...], tail: tuple[float, ...]) -> tuple[F, B, F]:
    """``|x|``, whether it is in the power series' range, and the picked polynomial."""
    a = fabs(x)
    small = a <= BIG
    v = where(small, a * a * 0.25, BIG / a * 2.0 - 1.0)
    p = polyval_pieces([(small, series), (None, tail)], v)
    return a, small, p


def i0(x: F) -> F:
    a, small, p = _parts(x, I0_SERIES, I0E_TAIL)
    return where(small, p, where(a.eq(math.inf), math.nan, exp(a) * (p / sqrt(a))))


def i0e(x: F) -> F:
    a, small, p = _parts(x, I0_SERIES, I0E_TAIL)
    return where(small, exp(-a) * p, p / sqrt(a))


def i1(x: F) -> F:
    a, small, p = _parts(x, I1_SERIES, I1E_TAIL)
    big = where(a.eq(math.inf), math.nan, exp(a) * (p / sqrt(a)))
    return where(small, x * 0.5 * p, where(x < 0.0, -big, big))


def i1e(x: F) -> F:
    a, small, p = _parts(x, I1_SERIES, I1E_TAIL)
    big = p / sqrt(a)
    return where(small, exp(-a) * (x * 0.5 * p), where(x < 0.0, -big, big))
