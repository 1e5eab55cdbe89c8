"""Fit the polynomial pieces of Yota's special functions (``yota.ir.ops.special_*``).

Each piece approximates a smooth function ``g`` on an interval by a polynomial in
``t`` in [-1, 1] (the interval mapped affinely): Chebyshev interpolation in 60-digit
arithmetic (mpmath), converted to monomial coefficients and rounded to float64. The
script prints, per piece, the degree, the largest relative error of the float64 Horner
evaluation against mpmath on a dense grid, and the coefficients as Python source to
paste into the module. Nothing imports this file; run it to reproduce or refit:

    pip install mpmath; python tools/fit_specfun.py [piece ...]
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import mpmath as mp
import numpy as np

mp.mp.dps = 60
Fn = Callable[[mp.mpf], mp.mpf]


def cheb_fit(g: Fn, deg: int) -> list[mp.mpf]:
    """Monomial coefficients (highest first) of the degree-``deg`` Chebyshev interpolant
    of ``g`` on [-1, 1]."""
    n = deg + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    vals = [g(t) for t in nodes]
    c = []
    for j in range(n):
        s = sum(v * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k, v in enumerate(vals))
        c.append(2 * s / n)
    c[0] /= 2
    mono = [mp.mpf(0)] * n  # sum c_j T_j as a polynomial, lowest power first
    t_prev, t_cur = [mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]
    for j in range(n):
        tj = t_prev if j == 0 else t_cur if j == 1 else None
        if j >= 2:
            nxt = [mp.mpf(0)] + [2 * a for a in t_cur]
            for i, a in enumerate(t_prev):
                nxt[i] -= a
            t_prev, t_cur = t_cur, nxt
            tj = t_cur
        assert tj is not None
        for i, a in enumerate(tj):
            mono[i] += c[j] * a
    return mono[::-1]


def horner(coefs: list[float], t: np.ndarray) -> np.ndarray:
    acc = np.full_like(t, coefs[0])
    for a in coefs[1:]:
        acc = acc * t + a
    return acc


def check(g: Fn, coefs: list[float], n: int = 3000) -> float:
    ts = np.linspace(-1.0, 1.0, n)
    got = horner(coefs, ts)
    worst = 0.0
    for t, y in zip(ts, got, strict=True):
        want = g(mp.mpf(float(t)))
        if want != 0:
            worst = max(worst, float(abs((mp.mpf(float(y)) - want) / want)))
    return worst


def fit(name: str, g: Fn, deg: int) -> list[float]:
    coefs = [float(a) for a in cheb_fit(g, deg)]
    err = check(g, coefs)
    print(f"# {name}: degree {deg}, max relative error {err:.3g} "
          f"({err / 2.0 ** -53:.2f} half-ulps)")
    print(f"{name.upper()} = (")
    for i in range(0, len(coefs), 3):
        print("    " + " ".join(f"{a!r}," for a in coefs[i:i + 3]))
    print(")")
    return coefs


def on(a: float, b: float, f: Fn) -> Fn:
    """``f`` on [a, b] as a function of t in [-1, 1]."""
    A, B = mp.mpf(a), mp.mpf(b)
    return lambda t: f((A + B) / 2 + (B - A) / 2 * t)


X0 = mp.findroot(mp.digamma, mp.mpf("1.46"))  # the positive root of digamma


def _lgamma_r(z: mp.mpf) -> mp.mpf:
    return mp.loggamma(z) / (z - 2) if z != 2 else mp.digamma(2)


def _digamma_r(z: mp.mpf) -> mp.mpf:
    return mp.digamma(z) / (z - X0) if abs(z - X0) > mp.mpf(10) ** -40 else mp.polygamma(1, X0)


def _erf_r(u: mp.mpf) -> mp.mpf:  # erf(x)/x as a function of u = x^2
    return mp.erf(mp.sqrt(u)) / mp.sqrt(u) if u > 0 else 2 / mp.sqrt(mp.pi)


def _erfinv_r(u: mp.mpf) -> mp.mpf:  # erfinv(y)/y as a function of u = y^2
    return mp.erfinv(mp.sqrt(u)) / mp.sqrt(u) if u > 0 else mp.sqrt(mp.pi) / 2


def erfcx(x: mp.mpf) -> mp.mpf:
    return mp.exp(x * x) * mp.erfc(x)


def _erfcinv_s(s: mp.mpf) -> mp.mpf:
    """erfcinv(q) for q = exp(-s^2), divided by s (smooth in s)."""
    q = mp.exp(-s * s)
    if q > mp.mpf(10) ** -30:
        return mp.erfinv(1 - q) / s
    return mp.findroot(lambda z: mp.log(mp.erfc(z)) + s * s, s) / s


def _i0e(x: mp.mpf) -> mp.mpf:
    return mp.besseli(0, x) * mp.exp(-x)


def _i1e_over_x(x: mp.mpf) -> mp.mpf:
    return mp.besseli(1, x) * mp.exp(-x) / x if x != 0 else mp.mpf(1) / 2


def _erfcx_k4(t: mp.mpf) -> mp.mpf:
    """erfcx(x) (x + 4) / 4 at x = 4 (1 + t) / (1 - t): t in [-1, 1) covers x >= 0."""
    if t >= 1:
        return 1 / mp.sqrt(mp.pi) / 4
    x = 4 * (1 + t) / (1 - t)
    return erfcx(x) * (x + 4) / 4


def _bessel_tail(nu: int, big: float) -> Fn:
    """sqrt(x) exp(-x) I_nu(x) at x = big / w, as a function of w in (0, 1]."""
    def g(w: mp.mpf) -> mp.mpf:
        if w == 0:
            return 1 / mp.sqrt(2 * mp.pi)
        x = big / w
        return mp.besseli(nu, x) * mp.exp(-x) * mp.sqrt(x)
    return g


ERFCINV_S = [0.8325546111576977, 2.0, 4.0, 8.0, 16.0, 27.3]  # the pieces' ends in s
BESSEL_BIG = 10.0  # power series below, the asymptotic pieces above

PIECES: dict[str, tuple[Fn, int]] = {
    "lgamma_r": (on(1.5, 2.5, _lgamma_r), 17),
    "digamma_r": (on(1.0, 2.0, _digamma_r), 21),
    "erf_r": (on(0.0, 0.25, _erf_r), 8),
    "erfinv_r": (on(0.0, 0.25, _erfinv_r), 13),
    "erfcx_k4": (_erfcx_k4, 23),
    **{f"erfcinv_s{i}": (on(a, b, _erfcinv_s), 8)
       for i, (a, b) in enumerate(zip(ERFCINV_S, ERFCINV_S[1:], strict=False))},
    "i0e_tail": (on(0.0, 1.0, _bessel_tail(0, BESSEL_BIG)), 18),
    "i1e_tail": (on(0.0, 1.0, _bessel_tail(1, BESSEL_BIG)), 18),
}


def main(names: list[str]) -> None:
    for name in names or list(PIECES):
        g, deg = PIECES[name]
        fit(name, g, deg)


if __name__ == "__main__":
    main(sys.argv[1:])
