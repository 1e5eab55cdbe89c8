"""``scipy.stats`` distributions on traced arrays: NumPy compositions run on the tracers.

While a trace runs, ``scipy_api`` wraps the public methods of SciPy's distribution
classes; a call holding a traced value (in ``x`` or in a parameter, module-level or
frozen: ``norm.logpdf(x, mu, s)``, ``norm(mu, s).logpdf(x)``) runs the composition here
instead, on the tracers, with SciPy's semantics: parameters broadcast with ``x``, the
result is float64, ``-inf``/``0`` outside the support, NaN for invalid parameters
(``scale <= 0``, ``df <= 0``...) or NaN input, and the same formulas as SciPy's
(``t`` through ``log(poch(df/2, 1/2))``, ``logcdf`` as ``log1p(-sf)`` above the median...).
Each value that the function would discard is replaced by a harmless one before it is
computed, so no gradient picks up ``0 * inf``.

Covered: ``norm``, ``expon``, ``laplace``, ``logistic``, ``cauchy``, ``uniform``,
``lognorm`` (``logpdf pdf logcdf cdf logsf sf ppf rvs``), ``t``, ``gamma``, ``beta``
(``logpdf pdf``, and ``rvs`` with constant shape parameters), ``poisson``, ``binom``,
``bernoulli`` (``logpmf pmf``), ``multivariate_normal`` (``logpdf pdf``, through the
Cholesky factor, ``allow_singular=False``; ``rvs`` with a constant ``cov``) and
``dirichlet`` (``logpdf pdf``; SciPy's checks of ``x`` become guards). Anything else on
traced values is an ``UnsupportedError`` naming it.

``rvs`` draws as SciPy does (the same generator method with the same arguments: with no
``random_state``, NumPy's global generator, recorded like any draw) and moves and scales
the numbers with the traced ``loc``/``scale``: the reparameterization, differentiable.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.special as sc

from yota.ir.errors import UnsupportedError, YotaError

from ..patching import NumpyPatch
from ..userloc import where as user_line

F64 = np.float64
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
Fn = Callable[..., Any]


def f64(x: Any) -> Any:
    """``x`` as a float64 array (traced or not), as SciPy makes its arguments."""
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)  # a list of traced values is stacked (while tracing)
    if isinstance(x, (int, float, np.ndarray, np.generic)):
        return np.asarray(x, dtype=np.result_type(x, F64))
    return x if x.dtype == F64 else x.astype(F64)


def _plain(x: Any) -> bool:
    return isinstance(x, (int, float, np.ndarray, np.generic, list, tuple))


def constant(x: Any) -> np.ndarray | None:
    """``x`` as a plain array when it is one, or a constant of the trace (a captured
    array, ``np.eye(2)``); None for a traced value."""
    if _plain(x):
        return np.asarray(x)
    try:
        return np.asarray(x.__array__())
    except YotaError:
        return None


def _tail(cdf: Fn, sf: Fn, median: float, upper: bool) -> Fn:
    """SciPy's generic ``logcdf`` (``upper``: ``logsf``): the log of the small side, and
    ``log1p(-other)`` past the median."""
    def f(z: Any, *s: Any) -> Any:
        if upper:
            return np.where(z > median, np.log(sf(z, *s)), np.log1p(-cdf(z, *s)))
        return np.where(z < median, np.log(cdf(z, *s)), np.log1p(-sf(z, *s)))
    return f


@dataclass
class Dist:
    """A standardized distribution: formulas of ``z = (x - loc) / scale`` and the shape
    parameters; ``inner`` is a point of the support (what discarded lanes compute at)."""

    logpdf: Fn
    support: tuple[float, float] = (-math.inf, math.inf)
    inner: float = 0.0
    cdf: Fn | None = None
    sf: Fn | None = None
    logcdf: Fn | None = None
    logsf: Fn | None = None
    ppf: Fn | None = None
    draw: Callable[..., Any] | None = None  # (generator, shapes, size) -> standard numbers
    argcheck: Fn = field(default=lambda *s: np.asarray(True))
    discrete: bool = False
    upper: Fn | None = None  # the support's upper end from the shape parameters


def _positive(*s: Any) -> Any:
    out: Any = True
    for v in s:
        out = np.logical_and(out, np.greater(v, 0))
    return out


def _norm_logpdf(z: Any) -> Any:
    return -(z * z) / 2 - LOG_SQRT_2PI


def _cauchy_logpdf(z: Any) -> Any:
    a = np.abs(z)
    big = a >= 1
    lo, hi = np.where(big, 0.5, a), np.where(big, a, 2.0)
    return np.where(big, -math.log(math.pi) - (2 * np.log(hi) + np.log1p((1 / hi) ** 2)),
                    -math.log(math.pi) - np.log1p(lo ** 2))


def _laplace_cdf(z: Any) -> Any:
    e = np.exp(-np.abs(z))
    return np.where(z > 0, 1.0 - 0.5 * e, 0.5 * e)


def _lognorm_logpdf(z: Any, s: Any) -> Any:
    pos = z > 0
    zs = np.where(pos, z, 1.0)
    lz = np.log(zs)
    return np.where(pos, -lz ** 2 / (2 * s ** 2) - np.log(s * zs * math.sqrt(2 * math.pi)),
                    -np.inf)


def _log_poch_half(a: Any) -> Any:
    """``log(Gamma(a + 1/2) / Gamma(a))`` without the cancellation of two large
    ``gammaln`` (Stirling's series of the difference from ``a >= 8``)."""
    big = a >= 8
    ab, asm = np.where(big, a, 8.0), np.where(big, 1.0, a)
    corr = _stirling_tail(ab + 0.5) - _stirling_tail(ab)
    far = (ab - 0.5) * np.log1p(0.5 / ab) + 0.5 * np.log(ab + 0.5) - 0.5 + corr
    return np.where(big, far, sc.gammaln(asm + 0.5) - sc.gammaln(asm))


def _stirling_tail(z: Any) -> Any:
    w = 1 / z
    w2 = w * w
    return w * (1 / 12 + w2 * (-1 / 360 + w2 * (1 / 1260 + w2 * (-1 / 1680 + w2 / 1188))))


def _t_logpdf(z: Any, df: Any) -> Any:
    inf = np.isinf(df)
    d = np.where(inf, 1.0, df)
    t = (_log_poch_half(0.5 * d) - 0.5 * (np.log(d) + math.log(math.pi))
         - (d + 1) / 2 * np.log1p(z * z / d))
    return np.where(inf, _norm_logpdf(z), t)


def _binom_logpmf(k: Any, n: Any, p: Any) -> Any:
    comb = sc.gammaln(n + 1) - (sc.gammaln(k + 1) + sc.gammaln(n - k + 1))
    return comb + sc.xlogy(k, p) + sc.xlog1py(n - k, -p)


def _unit(*s: Any) -> Any:
    return np.logical_and(np.greater_equal(s[-1], 0), np.less_equal(s[-1], 1))


def _logistic_logpdf(z: Any) -> Any:
    y = -np.abs(z)
    return y - 2.0 * np.log1p(np.exp(y))


def _expon_cdf(z: Any) -> Any:
    return -np.expm1(-z)


def _cauchy_cdf(z: Any) -> Any:
    return np.arctan2(1.0, -z) / math.pi


def _cauchy_sf(z: Any) -> Any:
    return np.arctan2(1.0, z) / math.pi


def _cauchy_ppf(q: Any) -> Any:
    """``tan(pi (q - 1/2))`` near the middle; ``-1/tan(pi q)`` and ``1/tan(pi (1 - q))``
    in the tails, where ``q - 1/2`` would lose the digits of a small ``q``."""
    lo, hi = q < 0.25, q > 0.75
    mid = np.where(lo | hi, 0.5, q)
    ql, qh = np.where(lo, q, 0.1), np.where(hi, q, 0.9)
    return np.where(lo, -1.0 / np.tan(math.pi * ql),
                    np.where(hi, 1.0 / np.tan(math.pi * (1.0 - qh)),
                             np.tan(math.pi * (mid - 0.5))))


def _laplace_sf(z: Any) -> Any:
    return _laplace_cdf(-z)


def _laplace_ppf(q: Any) -> Any:
    hi = q > 0.5
    return np.where(hi, -np.log(2 * (1 - np.where(hi, q, 0.0))), np.log(2 * np.where(hi, 0.25, q)))


DISTS: dict[str, Dist] = {
    "norm": Dist(_norm_logpdf, cdf=sc.ndtr, sf=lambda z: sc.ndtr(-z), logcdf=sc.log_ndtr,
                 logsf=lambda z: sc.log_ndtr(-z), ppf=sc.ndtri,
                 draw=lambda g, s, size: g.standard_normal(size)),
    "expon": Dist(lambda z: -z, (0.0, math.inf), 1.0, cdf=_expon_cdf,
                  sf=lambda z: np.exp(-z), logcdf=_tail(_expon_cdf, lambda z: np.exp(-z),
                                                        math.log(2), False),
                  logsf=lambda z: -z, ppf=lambda q: -np.log1p(-q),
                  draw=lambda g, s, size: g.standard_exponential(size)),
    "laplace": Dist(lambda z: -np.abs(z) - math.log(2), cdf=_laplace_cdf, sf=_laplace_sf,
                    logcdf=_tail(_laplace_cdf, _laplace_sf, 0.0, False),
                    logsf=_tail(_laplace_cdf, _laplace_sf, 0.0, True),
                    ppf=_laplace_ppf,
                    draw=lambda g, s, size: g.laplace(0, 1, size=size)),
    "logistic": Dist(_logistic_logpdf, cdf=sc.expit, sf=lambda z: sc.expit(-z),
                     logcdf=sc.log_expit, logsf=lambda z: sc.log_expit(-z), ppf=sc.logit,
                     draw=lambda g, s, size: g.logistic(size=size)),
    "cauchy": Dist(_cauchy_logpdf, cdf=_cauchy_cdf, sf=_cauchy_sf,
                   logcdf=_tail(_cauchy_cdf, _cauchy_sf, 0.0, False),
                   logsf=_tail(_cauchy_cdf, _cauchy_sf, 0.0, True),
                   ppf=_cauchy_ppf,
                   draw=lambda g, s, size: g.standard_cauchy(size=size)),
    "uniform": Dist(lambda z: np.zeros_like(z), (0.0, 1.0), 0.5, cdf=lambda z: z,
                    sf=lambda z: 1.0 - z, logcdf=lambda z: np.log(z),
                    logsf=lambda z: np.log1p(-z), ppf=lambda q: q,
                    draw=lambda g, s, size: g.uniform(0.0, 1.0, size)),
    "lognorm": Dist(_lognorm_logpdf, (0.0, math.inf), 1.0,
                    cdf=lambda z, s: sc.ndtr(np.log(z) / s),
                    sf=lambda z, s: sc.ndtr(-np.log(z) / s),
                    logcdf=lambda z, s: sc.log_ndtr(np.log(z) / s),
                    logsf=lambda z, s: sc.log_ndtr(-np.log(z) / s),
                    ppf=lambda q, s: np.exp(s * sc.ndtri(q)), argcheck=_positive,
                    draw=lambda g, s, size: np.exp(s[0] * g.standard_normal(size))),
    "t": Dist(_t_logpdf, argcheck=_positive,
              draw=lambda g, s, size: g.standard_t(s[0], size=size)),
    "gamma": Dist(lambda z, a: sc.xlogy(a - 1.0, z) - z - sc.gammaln(a), (0.0, math.inf),
                  1.0, argcheck=_positive,
                  draw=lambda g, s, size: g.standard_gamma(s[0], size)),
    "beta": Dist(lambda z, a, b: sc.xlog1py(b - 1.0, -z) + sc.xlogy(a - 1.0, z)
                 - sc.betaln(a, b), (0.0, 1.0), 0.5, argcheck=_positive,
                 draw=lambda g, s, size: g.beta(s[0], s[1], size)),
    "poisson": Dist(lambda k, mu: sc.xlogy(k, mu) - sc.gammaln(k + 1) - mu, (0.0, math.inf),
                    0.0, argcheck=lambda mu: np.greater_equal(mu, 0), discrete=True,
                    draw=lambda g, s, size: g.poisson(s[0], size)),
    "binom": Dist(_binom_logpmf, (0.0, math.inf), 0.0, discrete=True, upper=lambda n, p: n,
                  argcheck=lambda n, p: np.greater_equal(n, 0) & np.equal(np.floor(n), n)
                  & _unit(p), draw=lambda g, s, size: g.binomial(s[0], s[1], size)),
    "bernoulli": Dist(lambda k, p: _binom_logpmf(k, 1.0, p), (0.0, 1.0), 0.0, discrete=True,
                      argcheck=_unit, draw=lambda g, s, size: g.binomial(1, s[0], size)),
}
SAFE_SHAPES = {"binom": (1.0, 0.5), "bernoulli": (0.5,)}  # shape values where discarded


# -- the methods of a univariate distribution --------------------------------------------------
@dataclass
class Standard:
    """``x`` standardized, the parameters made safe where they are invalid, and what
    SciPy's methods test: ``ok`` (valid parameters), the support ``[lo, hi]``."""

    z: Any
    shapes: list[Any]
    ok: Any
    scale: Any
    loc: Any
    lo: float
    hi: Any


def standardize(name: str, d: Dist, x: Any, shapes: tuple[Any, ...], loc: Any,
                scale: Any) -> Standard:
    shapes_f = [f64(s) for s in shapes]
    sok = np.greater(scale, 0)
    ok = np.logical_and(d.argcheck(*shapes_f), sok)
    safe = np.where(sok, scale, 1)
    z = f64((x - loc) / safe)  # in the arguments' own dtype, then float64, as SciPy
    placeholders = SAFE_SHAPES.get(name, (1.0,) * len(shapes_f))
    sh = [np.where(ok, s, p) for s, p in zip(shapes_f, placeholders, strict=False)]
    hi = d.upper(*sh) if d.upper is not None else d.support[1]
    return Standard(z, sh, ok, f64(safe), f64(loc), d.support[0], hi)


def _bad(s: Standard, out: Any) -> Any:
    """NaN where the parameters are invalid or ``x`` is NaN (SciPy's ``badvalue``)."""
    return np.where(np.logical_not(s.ok) | np.isnan(s.z), np.nan, out)


def _in(s: Standard, cond: Any, d: Dist) -> Any:
    return np.where(cond, s.z, d.inner)


def logpdf(d: Dist, s: Standard) -> Any:
    cond = s.ok & (s.z >= s.lo) & (s.z <= s.hi)
    if d.discrete:
        cond = cond & np.equal(np.floor(s.z), s.z)
        v = d.logpdf(_in(s, cond, d), *s.shapes)
    else:
        v = d.logpdf(_in(s, cond, d), *s.shapes) - np.log(s.scale)
    return _bad(s, np.where(cond, v, -np.inf))


def _cumulative(d: Dist, s: Standard, f: Fn | None, what: str, outside: float,
                at_end: float, upper: bool) -> Any:
    """cdf/logcdf (``upper`` False) and sf/logsf: ``f`` inside the open support,
    ``at_end`` past its end (``hi`` for the cdf, ``lo`` for the sf), ``outside`` beyond
    the other end."""
    if f is None:
        raise UnsupportedError(f"{what} at {user_line()} is not supported on traced "
                               "arrays (it needs the incomplete beta or gamma function)")
    inside = s.ok & (s.z > s.lo) & (s.z < s.hi)
    end = s.ok & ((s.z <= s.lo) if upper else (s.z >= s.hi))
    out = np.where(inside, f(_in(s, inside, d), *s.shapes), outside)
    return _bad(s, np.where(end, at_end, out))


def ppf(d: Dist, s: Standard, q: Any, what: str) -> Any:
    if d.ppf is None:
        raise UnsupportedError(f"{what} at {user_line()} is not supported on traced arrays")
    q = f64(q)
    ok = s.ok & np.equal(s.loc, s.loc)
    inside = ok & (q > 0) & (q < 1)
    out = np.where(inside, d.ppf(np.where(inside, q, 0.5), *s.shapes) * s.scale + s.loc,
                   np.nan)
    for end, value in ((0.0, s.lo), (1.0, s.hi)):
        infinite = isinstance(value, float) and not math.isfinite(value)
        at = value if infinite else value * s.scale + s.loc
        out = np.where(ok & np.equal(q, end), at, out)
    return out


def univariate(obj: Any, method: str, args: tuple[Any, ...], kwds: dict[str, Any]) -> Any:
    """``obj.<method>(*args, **kwds)`` (``obj`` one of SciPy's distribution objects) on
    traced values."""
    name = getattr(obj, "name", type(obj).__name__)
    what = f"scipy.stats.{name}.{method}"
    d = DISTS.get(name)
    if d is None or method not in _METHODS:
        raise UnsupportedError(f"{what} at {user_line()} is not supported on traced arrays "
                               f"(supported: {', '.join(sorted(DISTS))}; their "
                               f"{', '.join(_METHODS)})")
    if method == "rvs":
        return rvs(obj, name, d, args, kwds)
    x, rest = (args[0], args[1:]) if args else (kwds.pop(_FIRST[method]), ())
    shapes, loc, scale = obj._parse_args(*rest, **kwds)
    s = standardize(name, d, 0.0 if method == "ppf" else x, shapes, loc,
                    1.0 if d.discrete else scale)
    return _METHODS[method](d, s, x, what)


_FIRST = {"ppf": "q", "logpmf": "k", "pmf": "k"}
_METHODS: dict[str, Fn] = {
    "logpdf": lambda d, s, x, w: logpdf(d, s),
    "pdf": lambda d, s, x, w: np.exp(logpdf(d, s)),
    "logpmf": lambda d, s, x, w: logpdf(d, s),
    "pmf": lambda d, s, x, w: np.exp(logpdf(d, s)),
    "cdf": lambda d, s, x, w: _cumulative(d, s, d.cdf, w, 0.0, 1.0, False),
    "logcdf": lambda d, s, x, w: _cumulative(d, s, d.logcdf, w, -np.inf, 0.0, False),
    "sf": lambda d, s, x, w: _cumulative(d, s, d.sf, w, 0.0, 1.0, True),
    "logsf": lambda d, s, x, w: _cumulative(d, s, d.logsf, w, -np.inf, 0.0, True),
    "ppf": lambda d, s, x, w: ppf(d, s, x, w),
    "rvs": lambda d, s, x, w: None,
}


# -- drawing -----------------------------------------------------------------------------------
def generator(obj: Any, random_state: Any, what: str) -> Any:
    """What to draw from as SciPy would: NumPy's global generator through ``np.random``'s
    functions (recorded while tracing), a fresh ``RandomState`` for an int seed, else the
    generator given (recorded when the function reaches it: an argument, a closure...)."""
    if random_state is None:
        own = getattr(obj, "_random_state", None)
        if own is None or own is np.random.mtrand._rand:
            return np.random
        raise UnsupportedError(f"{what} at {user_line()}: the distribution was made with "
                               "its own seed; pass random_state=rng (a generator the "
                               "function receives) so that the draws are recorded")
    if isinstance(random_state, (int, np.integer)):
        return np.random.RandomState(int(random_state))
    return random_state


def rvs(obj: Any, name: str, d: Dist, args: tuple[Any, ...], kwds: dict[str, Any]) -> Any:
    what = f"scipy.stats.{name}.rvs"
    kwds = dict(kwds)
    rs, size = kwds.pop("random_state", None), kwds.pop("size", None)
    n = obj.numargs + (1 if d.discrete else 2)  # shapes, loc (and scale), then size
    if len(args) > n:
        size, args = args[n], args[:n]
    shapes, loc, *rest = obj._parse_args(*args, **kwds)
    scale = rest[0] if rest and not d.discrete else 1.0
    if d.draw is None or any(constant(s) is None for s in shapes):
        raise UnsupportedError(f"{what} at {user_line()}: the draws would depend on traced "
                               "shape parameters; draw with constant ones (traced loc and "
                               "scale are fine: the numbers are moved and scaled)")
    if size is None:
        size = np.broadcast_shapes(*(np.shape(v) for v in (*shapes, loc, scale)))
    std = d.draw(generator(obj, rs, what), [constant(s) for s in shapes], size)
    return std + loc if d.discrete else std * scale + loc


# -- multivariate ------------------------------------------------------------------------------
def _squeeze(out: Any) -> Any:
    out = np.squeeze(out)
    return out[()] if np.ndim(out) == 0 else out


def mvn_parameters(mean: Any, cov: Any) -> tuple[int, Any, Any]:
    """SciPy's ``_process_parameters`` of ``multivariate_normal`` (dimension, mean vector,
    covariance matrix from a scalar, a diagonal or a matrix)."""
    cov = f64(1.0 if cov is None else cov)
    if mean is not None:
        mean = f64(mean)
        dim = int(np.size(mean))
    else:
        dim = 1 if np.ndim(cov) < 2 else int(np.shape(cov)[0])
        mean = np.zeros(dim)
    if dim == 1:
        mean, cov = np.reshape(mean, (1,)), np.reshape(cov, (1, 1))
    if np.ndim(mean) != 1 or np.shape(mean)[0] != dim:
        raise ValueError(f"Array 'mean' must be a vector of length {dim}.")
    if np.ndim(cov) == 0:
        cov = cov * np.eye(dim)
    elif np.ndim(cov) == 1:
        cov = np.diag(cov)
    elif np.shape(cov) != (dim, dim):
        raise ValueError(f"Dimension mismatch: array 'cov' is of shape {np.shape(cov)}, "
                         f"but 'mean' is a vector of length {dim}.")
    return dim, mean, cov


def mvn_logpdf(x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
    """``-(d log(2 pi) + log det(cov) + |L^-1 (x - mean)|^2) / 2`` with ``L`` the
    Cholesky factor (a covariance that is not positive definite raises ``LinAlgError``)."""
    if allow_singular:
        raise UnsupportedError(f"scipy.stats.multivariate_normal at {user_line()}: "
                               "allow_singular=True is not supported on traced arrays")
    dim, mean, cov = mvn_parameters(mean, cov)
    x = f64(x)
    if np.ndim(x) == 0:
        x = np.reshape(x, (1,))
    if np.ndim(x) == 1:
        x = np.reshape(x, (-1, 1) if dim == 1 else (1, -1))
    chol = np.linalg.cholesky(cov)
    dev = x - mean
    z = np.linalg.solve(chol, np.reshape(dev, (-1, dim)).T)
    maha = np.reshape(np.sum(z * z, axis=0), np.shape(dev)[:-1])
    logdet = 2.0 * np.sum(np.log(np.diagonal(chol)))
    return _squeeze(-0.5 * (dim * math.log(2 * math.pi) + logdet + maha))


def mvn_rvs(mean: Any = None, cov: Any = 1, size: Any = 1, random_state: Any = None,
            obj: Any = None) -> Any:
    what = "scipy.stats.multivariate_normal.rvs"
    cov = constant(cov)
    if cov is None:
        raise UnsupportedError(f"{what} at {user_line()}: the draws would depend on a "
                               "traced cov (NumPy factors it by an SVD); use a constant cov, "
                               "or draw z = rng.standard_normal(...) and use mean + z @ L.T")
    dim, mean, cov = mvn_parameters(mean, cov)
    draws = generator(obj, random_state, what).multivariate_normal(np.zeros(dim), cov, size)
    return _squeeze(draws + mean)


def _dirichlet_x(alpha: Any, x: Any) -> Any:
    """SciPy's checks of ``alpha`` and ``x`` (on traced values each is a guard: other
    values that fail it trace again, and raise as SciPy does)."""
    if np.min(alpha) <= 0:
        raise ValueError("All parameters must be greater than 0")
    if np.ndim(alpha) != 1:
        raise ValueError("Parameter vector 'a' must be one dimensional, "
                         f"but a.shape = {np.shape(alpha)}.")
    k = np.shape(alpha)[0]
    if np.shape(x)[0] not in (k, k - 1):
        raise ValueError("Vector 'x' must have either the same number of entries as, or "
                         f"one entry fewer than, parameter vector 'a', but alpha.shape = "
                         f"{np.shape(alpha)} and x.shape = {np.shape(x)}.")
    if np.shape(x)[0] != k:
        x = np.concatenate([x, np.reshape(1 - np.sum(x, 0), (1, *np.shape(x)[1:]))])
    if np.min(x) < 0 or np.max(x) > 1:
        raise ValueError("Each entry in 'x' must be between zero and one.")
    small = np.reshape(alpha < 1, (k,) + (1,) * (np.ndim(x) - 1))
    if np.any(np.logical_and(np.equal(x, 0), small)):
        raise ValueError("Each entry in 'x' must be greater than zero if its alpha is "
                         "less than one.")
    if np.any(np.abs(np.sum(x, 0) - 1.0) > 10e-10):
        raise ValueError("The input vector 'x' must lie within the normal simplex.")
    return x


def dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    alpha, x = f64(alpha), f64(x)
    x = _dirichlet_x(alpha, x)
    lnb = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
    a = np.reshape(alpha - 1, (-1,) + (1,) * (np.ndim(x) - 1))
    return _squeeze(np.sum(sc.xlogy(a, x), 0) - lnb)


class Frozen:
    """``multivariate_normal(mean, cov)`` or ``dirichlet(alpha)`` with traced parameters."""

    def __init__(self, kind: str, obj: Any, params: dict[str, Any]) -> None:
        self.kind, self.obj, self.params = kind, obj, params

    def logpdf(self, x: Any) -> Any:
        if self.kind == "dirichlet":
            return dirichlet_logpdf(x, self.params["alpha"])
        return mvn_logpdf(x, **self.params)

    def pdf(self, x: Any) -> Any:
        return np.exp(self.logpdf(x))

    def rvs(self, size: Any = 1, random_state: Any = None) -> Any:
        if self.kind == "dirichlet":
            return dirichlet_rvs(self.params["alpha"], size, random_state, self.obj)
        p = {k: v for k, v in self.params.items() if k != "allow_singular"}
        return mvn_rvs(**p, size=size, random_state=random_state, obj=self.obj)


def dirichlet_rvs(alpha: Any, size: Any = 1, random_state: Any = None, obj: Any = None) -> Any:
    what = "scipy.stats.dirichlet.rvs"
    a = constant(alpha)
    if a is None:
        raise UnsupportedError(f"{what} at {user_line()}: the draws would depend on a "
                               "traced alpha; draw with a constant one")
    return generator(obj, random_state, what).dirichlet(a, size=size)


def _mvn_params(mean: Any = None, cov: Any = 1, allow_singular: bool = False,
                seed: Any = None) -> dict[str, Any]:
    return {"mean": mean, "cov": cov, "allow_singular": allow_singular}


def multivariate(obj: Any, kind: str, method: str, args: tuple[Any, ...],
                 kwds: dict[str, Any]) -> Any:
    what = f"scipy.stats.{kind}.{method}"
    if kind == "multivariate_normal":
        if method == "__call__":
            return Frozen(kind, obj, _mvn_params(*args, **kwds))
        if method in ("logpdf", "pdf"):
            v = mvn_logpdf(*args, **kwds)
            return np.exp(v) if method == "pdf" else v
        if method == "rvs":
            kwds["obj"] = obj
            return mvn_rvs(*args, **kwds)
    elif kind == "dirichlet":
        if method == "__call__":
            return Frozen(kind, obj, {"alpha": args[0] if args else kwds["alpha"]})
        if method in ("logpdf", "pdf"):
            v = dirichlet_logpdf(*args, **kwds)
            return np.exp(v) if method == "pdf" else v
        if method == "rvs":
            kwds["obj"] = obj
            return dirichlet_rvs(*args, **kwds)
    raise UnsupportedError(f"{what} at {user_line()} is not supported on traced arrays")


# -- the methods wrapped while a trace runs ----------------------------------------------------
UNIVARIATE = ("logpdf", "pdf", "logcdf", "cdf", "sf", "logsf", "ppf", "isf", "rvs",
              "logpmf", "pmf", "moment", "stats", "entropy", "mean", "var", "std",
              "median", "interval", "expect", "support", "nnlf", "fit")
MULTIVARIATE = ("__call__", "logpdf", "pdf", "logcdf", "cdf", "rvs", "entropy", "mean",
                "var", "cov")


# run here whenever the thread traces, traced arguments or not: a draw must be recorded
# (SciPy's own would be frozen into the program), and a frozen multivariate distribution
# must be ours for its draws to be
ALWAYS = ("rvs", "__call__")


def swaps(make: Callable[..., Any], traced: Callable[..., Any],
          tracing: Callable[[], bool]) -> list[Any]:
    """``make(owner, name, wrap)`` for every wrapped method of SciPy's distribution
    classes; a wrapped call whose arguments ``traced`` finds traced values (or any call
    of ``ALWAYS`` while this thread is ``tracing``) runs here."""
    from scipy.stats import _multivariate as mv
    from scipy.stats._distn_infrastructure import rv_continuous, rv_discrete, rv_generic

    def wrapping(run: Callable[..., Any], always: bool) -> Callable[[Any], Any]:
        def wrap(original: Any) -> Any:
            @functools.wraps(original)
            def wrapper(self: Any, *args: Any, **kwds: Any) -> Any:
                if traced(args, kwds) is None and not (always and tracing()):
                    with NumpyPatch.suspended():  # SciPy's own np.zeros: plain arrays
                        return original(self, *args, **kwds)
                return run(self, args, dict(kwds))
            return wrapper
        return wrap

    def univariate_method(m: str) -> Callable[..., Any]:
        return lambda self, args, kwds: univariate(self, m, args, kwds)

    def multivariate_method(kind: str, m: str) -> Callable[..., Any]:
        return lambda self, args, kwds: multivariate(self, kind, m, args, kwds)

    out = [make(cls, m, wrapping(univariate_method(m), m in ALWAYS))
           for cls in (rv_generic, rv_continuous, rv_discrete)
           for m in dict.fromkeys(UNIVARIATE) if m in cls.__dict__]
    for kind, cls in (("multivariate_normal", mv.multivariate_normal_gen),
                      ("dirichlet", mv.dirichlet_gen)):
        out += [make(cls, m, wrapping(multivariate_method(kind, m), m in ALWAYS))
                for m in MULTIVARIATE if hasattr(cls, m)]
    return out
