"""The error function family in the scalar language of ``special_scalar``: ``erf``,
``erfc``, ``erfcx`` (``exp(x^2) erfc(x)``), ``erfinv`` and ``erfcinv``.

- ``erf`` for ``|x| < 0.5``: ``x P(x^2)``. Elsewhere everything goes through
  ``erfcx`` on ``x >= 0``: one polynomial of degree 23 in ``t = (x - 4) / (x + 4)``
  (which maps ``[0, inf)`` onto ``[-1, 1)``) of ``erfcx(x) (x + 4) / 4``, and
  ``1 / (sqrt(pi) x)`` beyond ``1e8``. Then ``erfc(x) = exp(-x^2) erfcx(x)``, where
  ``exp(-x^2)`` is ``exp(-m^2) exp(-(x - m)(x + m))`` with ``m`` the multiple of 1/128
  nearest ``x`` (``m^2`` is exact), so the rounding of ``x^2`` is not magnified by the
  exponential (it would cost ``x^2`` ulps: 700 near the underflow).
- ``erfinv(y)`` for ``|y| <= 0.5``: ``y Q(y^2)``. The tails go through ``q = 1 - |y|``
  (exact): with ``s = sqrt(-log q)``, ``erfcinv(q) / s`` is smooth in ``s``; five
  pieces of degree 8 over ``s`` in ``[0.83, 27.3]`` (down to the smallest subnormal q)
  give it to ``7e-8``, and one Halley step on ``erfc(x) = q`` (written with ``erfcx``
  and ``exp(x^2 + log q)``, so nothing overflows) makes it exact to rounding.

Every polynomial was fitted by ``tools/fit_specfun.py`` (Chebyshev interpolation in
60-digit arithmetic); their errors as fitted are below a float64 ulp (the erfcinv
pieces: 7e-8, before the Halley step).
"""

from __future__ import annotations

import math

from .special_scalar import F, exp, fabs, log, polyval, polyval_pieces, rint, sqrt, where

SQRT_PI = math.sqrt(math.pi)
ERFCINV_ENDS = (0.8325546111576977, 2.0, 4.0, 8.0, 16.0, 27.3)

ERF_R = (
    8.777299809787717e-14, -6.37686858732805e-12, 4.1270252134730293e-10,
    -2.3472289797042594e-08, 1.151603779519474e-06, -4.762336934519552e-05,
    0.0016130716680617082, -0.043642058886697886, 1.0830752376761712,
)
ERFCX_K4 = (
    -1.9860046213777094e-11, 3.0140315157436664e-10, 1.8056061492473584e-10,
    -3.8163851917190945e-09, -7.955304769237317e-11, 3.062640513773187e-08,
    -1.858538071376256e-08, -2.1090510064839227e-07, 3.5587254786027525e-07,
    1.1730894595205767e-06, -4.715155967402764e-06, -9.085474539335742e-07,
    4.420318895616758e-05, -0.00011376324412131493, -7.023971404404158e-05,
    0.001528013927356252, -0.00659251333528659, 0.0190953787258951,
    -0.04350273430997378, 0.08271289696958106, -0.13521345782830899,
    0.19330217556630763, -0.2441371822702205, 0.27399891525012277,
)
ERFINV_R = (
    2.058034962675998e-13, 1.5684287601914327e-12, 1.1319201712761551e-11,
    8.772068185412855e-11, 6.879441319663008e-10, 5.456632770776933e-09,
    4.3982773297839775e-08, 3.619863812309669e-07, 3.0637436243944157e-06,
    2.6977001015419183e-05, 0.0002522747551745645, 0.0026140273452602484,
    0.03356743029704947, 0.9174083670522701,
)
ERFCINV_S = (
    (
        2.705879877515485e-05, -6.438965281525485e-05, 1.361898813853305e-05,
        0.0004306825081078664, -0.002698983507386949, 0.01169451672393582,
        -0.04097957049709924, 0.1185568775656566, 0.7471143731852725,
    ),
    (
        -1.0410468066329636e-05, 4.381312419747267e-05, -0.00014658979929718243,
        0.0005216529194701433, -0.0017787383289052025, 0.0056966781394477625,
        -0.01701759579330851, 0.04561068632618236, 0.9049203326464283,
    ),
    (
        -1.5250859268110733e-05, 4.744677467631405e-05, -0.00011088773746570134,
        0.00032929828473307024, -0.000978688394654247, 0.0027417078441962493,
        -0.007276505862116602, 0.01754552339829879, 0.9668851725025905,
    ),
    (
        -8.004834261066235e-06, 2.3238742471249833e-05, -4.86959068337357e-05,
        0.00013646235324986947, -0.00038735953493954035, 0.0010300083449132139,
        -0.002597547477123475, 0.005953586035441663, 0.9893527496558694,
    ),
    (
        -4.536566670635008e-07, 1.6404378311514454e-06, -4.844469254115685e-06,
        1.697185595311093e-05, -5.891101845182964e-05, 0.00019552505322788892,
        -0.0006155469601432496, 0.0017563366863842373, 0.9961046761521697,
    ),
)


def expx2(x: F, sign: float) -> F:
    """``exp(sign * x^2)`` for ``|x| <= 28`` with the error of one or two exponentials."""
    m = rint(x * 128.0) / 128.0
    r = (x - m) * (x + m)
    return exp(m * m * sign) * exp(r * sign)


def erfcx_pos(x: F) -> F:
    """``erfcx(x)`` for ``x >= 0`` (NaN stays NaN, ``inf`` gives 0)."""
    t = (x - 4.0) / (x + 4.0)
    near = polyval(ERFCX_K4, t) * 4.0 / (x + 4.0)
    return where(x > 1e8, (1.0 / SQRT_PI) / x, near)


def _erf_small(x: F) -> F:
    return x * polyval(ERF_R, x * x * 8.0 - 1.0)


def _erfc_abs(a: F) -> F:
    """``erfc(a)`` for ``a >= 0.5`` (0 beyond 28, where it underflows)."""
    ac = where(a > 28.0, 28.0, a)
    return expx2(ac, -1.0) * erfcx_pos(ac)


def erf(x: F) -> F:
    e = _erfc_abs(fabs(x))
    return where(fabs(x) < 0.5, _erf_small(x), where(x < 0.0, e - 1.0, 1.0 - e))


def erfc(x: F) -> F:
    e = _erfc_abs(fabs(x))
    return where(fabs(x) < 0.5, 1.0 - _erf_small(x), where(x < 0.0, 2.0 - e, e))


def erfcx(x: F) -> F:
    a = fabs(x)
    pos = erfcx_pos(a)
    grow = expx2(where(a > 27.0, 27.0, a), 1.0) * 2.0 - pos  # inf beyond 26.6
    return where(x < 0.0, grow, pos)


def _erfinv_small(y: F) -> F:
    return y * polyval(ERFINV_R, y * y * 8.0 - 1.0)


def erfcinv_tail(q: F) -> F:
    """``erfcinv(q)`` for ``0 <= q <= 0.5`` (``inf`` at 0, NaN below)."""
    lq = log(q)
    s = sqrt(-lq)
    ends = ERFCINV_ENDS
    masks = [s < b for b in ends[1:-1]] + [None]
    mid = [(a + b) / 2 for a, b in zip(ends, ends[1:], strict=False)]
    half = [(b - a) / 2 for a, b in zip(ends, ends[1:], strict=False)]
    c, h = s.k(mid[-1]), s.k(half[-1])
    for mask, cm, hm in zip(masks[-2::-1], mid[-2::-1], half[-2::-1], strict=True):
        assert mask is not None
        c, h = where(mask, cm, c), where(mask, hm, h)
    x = s * polyval_pieces(list(zip(masks, ERFCINV_S, strict=True)), (s - c) / h)
    m = rint(x * 128.0) / 128.0  # Halley's step on erfc(x) = q: u = f / f'
    qex2 = exp(m * m + lq + (x - m) * (x + m))
    u = (erfcx_pos(x) - qex2) * (-SQRT_PI / 2.0)
    x = x - u / (x * u + 1.0)
    return where(q.eq(0.0), math.inf, x)


def erfinv(y: F) -> F:
    a = fabs(y)
    tail = erfcinv_tail(1.0 - a)
    return where(a <= 0.5, _erfinv_small(y), where(y < 0.0, -tail, tail))


def erfcinv(q: F) -> F:
    low = erfcinv_tail(where(q > 1.0, 2.0 - q, q))
    mid = _erfinv_small(1.0 - q)
    return where((q >= 0.5) & (q <= 1.5), mid, where(q > 1.0, -low, low))
