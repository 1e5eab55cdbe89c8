"""``scipy.stats`` on traced arrays (``yota.numpy.scipy_stats``, wrapped in by
``yota.numpy.scipy_api`` while a trace runs).

- every supported method of every covered distribution, module-level and frozen, with
  traced ``x`` and parameters, equals SciPy's value: broadcasting, float64 results,
  ``-inf``/``0``/``1`` outside the support, NaN for invalid parameters and NaN input
  (rtol 1e-12: the compositions add a few roundings to SciPy's own formulas; 1e-10
  where a ``log1p``/``exp`` tail meets SciPy's ``erfc``, whose own error is that size);
- gradients with respect to ``x`` and every parameter match central finite differences
  (interp and llvm; second order for a few on the interpreter);
- ``multivariate_normal`` (through the Cholesky factor: scalar, diagonal and full
  covariances, mean None, one point or a batch, frozen) and ``dirichlet`` (SciPy's
  input checks as guards: other values that fail them retrace and raise);
- ``rvs`` draws the numbers eager SciPy draws (the same seed gives the same values) and
  its gradient with respect to ``loc``/``scale`` is the reparameterization's;
- unsupported methods (``t.cdf``: the incomplete beta function) name themselves; SciPy's
  classes are left as they were after a trace.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

st = pytest.importorskip("scipy.stats")

X = np.array([-np.inf, -30.0, -3.0, -1.0, -0.5, 0.0, 0.2, 0.5, 0.999, 1.0, 1.5, 4.0, 40.0,
              np.inf, np.nan])
Q = np.array([0.0, 1e-300, 1e-10, 0.1, 0.5, 0.9, 1 - 1e-12, 1.0, -0.1, 1.1, np.nan])
LOCS = np.array([0.0, 0.5, -1.0])[:, None]
SCALES = np.array([1.0, 2.0, -1.0])[:, None]  # a negative scale: NaN

# distribution -> (shape parameter values (one row valid, one invalid), methods)
CONT = ("logpdf", "pdf", "logcdf", "cdf", "logsf", "sf", "ppf")
DISTS: dict[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {
    "norm": ((), CONT), "expon": ((), CONT), "laplace": ((), CONT), "logistic": ((), CONT),
    "cauchy": ((), CONT), "uniform": ((), CONT),
    "lognorm": ((np.array([0.7, 1.3, -0.2])[:, None],), CONT),
    "t": ((np.array([3.0, np.inf, 0.0])[:, None],), ("logpdf", "pdf")),
    "gamma": ((np.array([0.5, 2.5, -1.0])[:, None],), ("logpdf", "pdf")),
    "beta": ((np.array([0.5, 2.0, 0.0])[:, None], np.array([3.0, 0.5, 1.0])[:, None]),
             ("logpdf", "pdf")),
}
DISCRETE: dict[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {
    "poisson": ((np.array([2.5, 0.0, -1.0])[:, None],), ("logpmf", "pmf")),
    "binom": ((np.array([6.0, 6.0, 2.5])[:, None], np.array([0.3, 1.0, 0.5])[:, None]),
              ("logpmf", "pmf")),
    "bernoulli": ((np.array([0.3, 0.0, 1.5])[:, None],), ("logpmf", "pmf")),
}
K = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 6.0, 7.0, np.nan])


def _scipy(f: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args, **kw)


def assert_like_scipy(got: Any, want: Any, what: str, rtol: float = 1e-12) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.dtype, want.dtype)
    with np.errstate(invalid="ignore"):
        ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (
            np.abs(got - want) <= 1e-300 + rtol * np.abs(want))
    if not np.all(ok):
        i = np.flatnonzero(~ok)[:4]
        pytest.fail(f"{what}: {got.reshape(-1)[i]} vs SciPy {want.reshape(-1)[i]}")


def _rtol(name: str, method: str) -> float:
    return 1e-10 if method in ("logcdf", "logsf", "ppf") or name == "lognorm" else 1e-12


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name", list(DISTS))
def test_continuous_methods_match_scipy(name: str, backend: str) -> None:
    shapes, methods = DISTS[name]
    d = getattr(st, name)
    for method in methods:
        x = Q if method == "ppf" else X

        def f(x: Any, loc: Any, scale: Any, *s: Any, m: str = method) -> Any:
            return getattr(d, m)(x, *s, loc=loc, scale=scale)

        got = yota.compile(f, x, LOCS, SCALES, *shapes, backend=backend)(x, LOCS, SCALES,
                                                                          *shapes)
        want = _scipy(getattr(d, method), x, *shapes, loc=LOCS, scale=SCALES)
        assert_like_scipy(got, want, f"{name}.{method}", _rtol(name, method))


@pytest.mark.parametrize("name", list(DISTS))
def test_frozen_distributions(name: str) -> None:
    shapes, methods = DISTS[name]
    d = getattr(st, name)
    valid = tuple(s[0, 0] for s in shapes)

    def f(x: Any, loc: Any) -> Any:
        frozen = d(*valid, loc=loc, scale=1.5)
        return tuple(getattr(frozen, m)(x) for m in methods if m != "ppf")

    got = yota.compile(f, X, 0.25)(X, 0.25)
    frozen = d(*valid, loc=0.25, scale=1.5)
    for g, m in zip(got, [m for m in methods if m != "ppf"], strict=True):
        assert_like_scipy(g, _scipy(getattr(frozen, m), X), f"frozen {name}.{m}",
                          _rtol(name, m))


@pytest.mark.parametrize("name", list(DISCRETE))
def test_discrete_methods_match_scipy(name: str) -> None:
    shapes, methods = DISCRETE[name]
    d = getattr(st, name)
    for method in methods:
        got = yota.compile(lambda k, *s, m=method: getattr(d, m)(k, *s, loc=0.0), K,
                           *shapes)(K, *shapes)
        assert_like_scipy(got, _scipy(getattr(d, method), K, *shapes), f"{name}.{method}")


def test_scalar_arguments_give_scalars_and_float32_gives_float64() -> None:
    x32 = np.array([0.5, 1.5], np.float32)
    got = yota.compile(lambda x, mu: st.norm.logpdf(x, mu), x32, np.float32(0.2))(
        x32, np.float32(0.2))
    assert_like_scipy(got, st.norm.logpdf(x32, np.float32(0.2)), "float32")
    v, g = yota.grad(lambda mu: st.norm.logpdf(1.0, mu, 2.0), 0.5)
    assert v == pytest.approx(st.norm.logpdf(1.0, 0.5, 2.0)) and g[0] == pytest.approx(0.125)


# -- gradients -----------------------------------------------------------------------------------
def _grad_cases() -> dict[str, tuple[Callable[..., Any], list[Any]]]:
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 0.9, 5)
    cases: dict[str, tuple[Callable[..., Any], list[Any]]] = {}
    def loss(name: str, x: Any, loc: Any, scale: Any, *s: Any) -> Any:
        d = getattr(st, name)  # the name is a static argument: one program per name
        ms = [m for m in DISTS[name][1] if m != "ppf"]
        return sum(np.sum(np.sin(getattr(d, m)(x, *s, loc=loc, scale=scale))) for m in ms)

    for name, (shapes, _) in DISTS.items():
        valid = [np.float64(s[0, 0]) + 0.1 for s in shapes]
        cases[name] = (loss, [name, x, np.float64(-0.3), np.float64(1.7), *valid])
    cases["norm.ppf"] = (lambda q, m, s: np.sum(st.norm.ppf(q, m, s)), [x, 0.2, 1.3])
    cases["poisson"] = (lambda mu: np.sum(st.poisson.logpmf(np.array([0., 1, 4]), mu)), [2.5])
    cases["binom"] = (lambda p: np.sum(st.binom.logpmf(np.array([0., 2, 5]), 6, p)), [0.3])
    cases["bernoulli"] = (lambda p: np.sum(st.bernoulli.pmf(np.array([0., 1, 1]), p)), [0.3])
    return cases


GRADS = _grad_cases()


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_finite_differences(name: str, backend: str) -> None:
    loss, args = GRADS[name]
    val, g = yota.grad(loss, *args, backend=backend)
    assert val == pytest.approx(loss(*args), rel=1e-12)
    floats = [a for a in args if not isinstance(a, str)]
    assert check_grad(loss, args, g, rtol=1e-6) == len(floats)


def test_second_order() -> None:
    from yota.ir.autodiff.check import check_grads

    for name in ("norm", "t", "gamma", "beta", "logistic"):
        loss, args = GRADS[name]
        _, tape = yota.trace(loss, *args)
        check_grads(yota.to_ir(tape), [np.asarray(a) for a in args[1:]], order=2, rtol=1e-4,
                    atol=1e-6)


# -- multivariate --------------------------------------------------------------------------------
def _spd(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return a @ a.T + d * np.eye(d)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_multivariate_normal(backend: str) -> None:
    rng = np.random.default_rng(1)
    X3, mu, C = rng.normal(size=(4, 3)), rng.normal(size=3), _spd(rng, 3)
    mvn = st.multivariate_normal
    cases: list[tuple[Callable[..., Any], list[Any]]] = [
        (lambda x, m, c: mvn.logpdf(x, m, c), [X3, mu, C]),
        (lambda x, m, c: mvn.pdf(x, m, c), [X3[0], mu, C]),
        (lambda x, m, c: mvn(m, c).logpdf(x), [X3, mu, C]),
        (lambda x, m, c: mvn.logpdf(x, m, cov=c), [X3, mu, np.diag(C)]),
        (lambda x, c: mvn.logpdf(x, None, c), [X3[:, 0], np.float64(2.0)]),
        (lambda x, m: mvn.logpdf(x, m), [X3.reshape(2, 2, 3), mu]),
    ]
    for f, args in cases:
        got = yota.compile(f, *args, backend=backend)(*args)
        assert_like_scipy(got, f(*args), "multivariate_normal", 1e-12)
    with pytest.raises(yota.YotaError, match="allow_singular"):
        yota.grad(lambda c: mvn.logpdf(X3, mu, c, allow_singular=True), C)


def test_multivariate_normal_gradients() -> None:
    rng = np.random.default_rng(2)
    X3, mu, A = rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=(3, 3))

    def loss(x: Any, m: Any, a: Any) -> Any:
        return np.sum(st.multivariate_normal(m, a @ a.T + 3 * np.eye(3)).logpdf(x))

    for backend in ("interp", "llvm"):
        _, g = yota.grad(loss, X3, mu, A, backend=backend)
        assert check_grad(loss, [X3, mu, A], g, rtol=1e-6) == 3


def test_dirichlet() -> None:
    alpha, x = np.array([1.5, 2.0, 3.0]), np.array([0.2, 0.3, 0.5])
    xs = np.array([[0.2, 0.5], [0.3, 0.25], [0.5, 0.25]])
    f = yota.compile(lambda x, a: (st.dirichlet.logpdf(x, a), st.dirichlet.pdf(x, a),
                                   st.dirichlet(a).logpdf(x[:2])), x, alpha)
    for got, want in zip(f(x, alpha), (st.dirichlet.logpdf(x, alpha), st.dirichlet.pdf(
            x, alpha), st.dirichlet.logpdf(x, alpha)), strict=True):
        assert_like_scipy(got, want, "dirichlet")
    got = yota.compile(lambda x, a: st.dirichlet.logpdf(x, a), xs, alpha)(xs, alpha)
    assert_like_scipy(got, st.dirichlet.logpdf(xs, alpha), "dirichlet batch")
    loss = lambda a: st.dirichlet.logpdf(x, a)  # noqa: E731 (x must stay on the simplex)
    _, g = yota.grad(loss, alpha)
    assert check_grad(loss, [alpha], g, rtol=1e-6) == 1
    compiled = yota.compile(lambda x, a: st.dirichlet.logpdf(x, a), x, alpha)
    with pytest.raises(ValueError, match="normal simplex"):  # the check is a guard
        compiled(np.array([0.2, 0.3, 0.6]), alpha)


# -- rvs -----------------------------------------------------------------------------------------
def test_rvs_draws_what_scipy_draws() -> None:
    def f(loc: Any, scale: Any) -> Any:
        return (st.norm.rvs(loc, scale, size=4), st.expon(loc, scale).rvs(3),
                st.logistic.rvs(loc=loc, scale=scale, size=(2, 2)),
                st.gamma.rvs(2.5, loc, scale, size=2), st.lognorm.rvs(0.5, loc, scale),
                st.poisson.rvs(3.0, size=3))

    np.random.seed(7)
    eager = f(0.5, 2.0)
    cf = yota.compile(f, 0.5, 2.0)
    np.random.seed(7)
    traced = cf(0.5, 2.0)
    for a, b in zip(traced, eager, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-15)
    np.random.seed(7)
    again = cf(0.5, 2.0)
    np.testing.assert_allclose(again[0], eager[0], rtol=1e-15)  # drawn at every call


def test_rvs_gradient_is_the_reparameterization() -> None:
    rng = np.random.default_rng(3)

    def loss(loc: Any, scale: Any) -> Any:
        return np.sum(st.norm.rvs(loc, scale, size=5, random_state=rng))

    state = rng.bit_generator.state
    _, g = yota.grad(loss, 0.3, 2.0)
    rng.bit_generator.state = state
    z = np.random.default_rng(3).standard_normal(5)
    assert g[0] == pytest.approx(5.0) and g[1] == pytest.approx(np.sum(z))
    mv = yota.compile(lambda m: st.multivariate_normal.rvs(m, np.eye(2), size=3,
                                                           random_state=1), np.zeros(2))
    np.testing.assert_allclose(mv(np.ones(2)), st.multivariate_normal.rvs(
        np.ones(2), np.eye(2), size=3, random_state=1))


def test_draws_without_traced_arguments_are_recorded_too() -> None:
    """A draw in a traced function is made again at every call, traced parameters or
    not (SciPy's own rvs would be frozen into the program)."""
    def f(x: Any) -> Any:
        return (x * st.poisson.rvs(3.0, size=3), st.norm(0.0, 1.0).rvs(2) + x,
                st.multivariate_normal([0.0, 1.0], np.eye(2)).rvs() + x,
                st.dirichlet([1.0, 2.0]).rvs() + x)

    cf = yota.compile(f, 1.0)
    for seed in (3, 4):
        np.random.seed(seed)
        eager = f(1.0)
        np.random.seed(seed)
        for a, b in zip(cf(1.0), eager, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-15)
    with pytest.raises(yota.YotaError, match="weibull_min.rvs"):
        yota.compile(lambda x: x + st.weibull_min.rvs(2.0, size=2), 1.0)


def test_unsupported_and_restored() -> None:
    from scipy.stats._distn_infrastructure import rv_continuous

    before = rv_continuous.__dict__["logpdf"]
    with pytest.raises(yota.YotaError, match=r"scipy\.stats\.t\.cdf .*test_scipy_stats"):
        yota.grad(lambda x: np.sum(st.t.cdf(x, 3.0)), np.ones(3))
    with pytest.raises(yota.YotaError, match=r"scipy\.stats\.weibull_min\.logpdf"):
        yota.grad(lambda x: np.sum(st.weibull_min.logpdf(x, 2.0)), np.ones(3))
    with pytest.raises(yota.YotaError, match="traced shape parameters"):
        yota.grad(lambda a: np.sum(st.gamma.rvs(a, size=2)), 2.0)
    assert rv_continuous.__dict__["logpdf"] is before
    assert st.norm.logpdf(0.0) == pytest.approx(-0.5 * np.log(2 * np.pi))
