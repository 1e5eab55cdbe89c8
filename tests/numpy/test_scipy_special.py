"""``scipy.special`` on traced arrays (``yota.numpy.special``, ``special_funcs``; the
special ops of ``yota.ir.ops.special``).

- values equal SciPy's on a grid that includes 0, -0.0, +-inf, NaN, the poles of
  ``gammaln``/``psi``, the ends of ``erfinv``'s domain and the far tails (``log_ndtr(-1e5)``,
  ``erfcinv(1e-300)``), in float64 and float32, on the interp, llvm and MLIR backends.
  Tolerances: our algorithms are within 4 ulps of the exact values (checked against
  mpmath below, away from the zeros that the reflection formula cancels near), SciPy's
  own loops are within ~50 ulps except where measured worse: ``erfc``/``erfcx``/``ndtr``
  in the tails (SciPy rounds ``x^2`` before the exponential: up to 1e3 ulps),
  ``gammaln`` near 1 and 2 (873 ulps), ``psi`` near its roots, ``log_ndtr`` past 6 (its
  ``-ndtr(-x)`` drops a term: 5e-10), ``betaln`` where one argument is large (2e-8).
  So ``rtol`` is 1e-14 (45 ulps) by default, larger for those, with an ``atol`` of 1e-14
  near zeros;
  float32 results are our float64 ones rounded once against SciPy's float32 loops:
  ``rtol`` 2e-6 (16 float32 ulps);
- gradients match central finite differences (first order on interp and llvm, second
  order on the interpreter), and the gradient programs run under the CUDA emulation
  (compiled by NVRTC when available) as on the interpreter;
- ``logsumexp``/``softmax``/``log_softmax``/``polygamma``/``multigammaln`` with their
  keywords and SciPy's edge cases; the tape names SciPy's functions; unsupported ones
  are errors naming them; nothing stays patched after a trace.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

sp = pytest.importorskip("scipy.special")

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 5e-324, 1e300, -1e300, 1.0,
         -1.0, 2.0, -2.0, 3.0, -3.0, -10.0, 0.5, -0.5, 1e-8, 1 - 1e-16, -1 + 1e-16, 26.0,
         -26.0, -40.0, -1e5, 1e-300, 1.4616321449683622, -0.5040830082644554, 2.0 - 1e-15]
GRID = np.concatenate([np.linspace(-1, 1, 101), np.linspace(-6.5, 6.5, 131),
                       np.linspace(-30, 30, 61), np.logspace(-300, 300, 31),
                       -np.logspace(-300, 300, 31), np.linspace(0.001, 2, 40), EDGES])

# name -> (rtol in float64, domain of regular points for gradients)
UNARY: dict[str, tuple[float, tuple[float, float]]] = {
    "gammaln": (1e-11, (0.2, 9)), "loggamma": (1e-11, (0.2, 9)), "psi": (1e-11, (0.3, 12)),
    "erf": (1e-14, (-3, 3)), "erfc": (1e-11, (-3, 5)), "erfcx": (1e-11, (-3, 30)),
    "erfinv": (1e-14, (-0.95, 0.95)), "erfcinv": (1e-14, (0.05, 1.95)),
    "ndtr": (1e-11, (-5, 5)), "ndtri": (1e-14, (0.02, 0.98)),
    "log_ndtr": (1e-9, (-30, 8)),  # SciPy's -ndtr(-x) past 6 drops ndtr(-x)^2/2: 5e-10 "i0": (1e-14, (-12, 12)), "i0e": (1e-14, (-20, 20)),
    "i1": (1e-14, (-12, 12)), "i1e": (1e-14, (-20, 20)), "expit": (1e-14, (-30, 30)),
    "logit": (1e-14, (0.02, 0.98)), "log_expit": (1e-14, (-30, 30)),
    "entr": (1e-14, (0.05, 5)),
}
BINARY: dict[str, tuple[float, tuple[float, float], tuple[float, float]]] = {
    "xlogy": (1e-14, (-3, 3), (0.1, 4)), "xlog1py": (1e-14, (-3, 3), (-0.9, 4)),
    "rel_entr": (1e-14, (0.1, 3), (0.1, 3)), "kl_div": (1e-14, (0.1, 3), (0.1, 3)),
    "huber": (1e-14, (0.5, 2), (-3, 3)), "pseudo_huber": (1e-14, (0.5, 2), (-3, 3)),
    "betaln": (5e-8, (0.2, 30), (0.2, 30)),  # SciPy: 1.9e-8 off where a >> b (ours: 1e-14)
}
BACKENDS = ["interp", "llvm", "mlir"]


def _scipy(f: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args, **kw)


def near_negative_pole(x: np.ndarray) -> np.ndarray:
    """Where SciPy's ``psi`` loses its digits (within 1e-6 of a pole at x < 0: it gives
    -5.5e15 at -1 + 1.1e-16, where -1 / 1.1e-16 = -9.0e15 is right, and ours is)."""
    with np.errstate(invalid="ignore"):
        return (x < 0) & (np.abs(x - np.round(x)) < 1e-6)


def assert_like_scipy(got: Any, want: Any, rtol: float, name: str, x: Any = None) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype)
    if got.dtype == np.float32:
        rtol = 2e-6
    atol = 1e-14 if got.dtype == np.float64 else 1e-30
    with np.errstate(invalid="ignore"):
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want))
                | (np.abs(got.astype(float) - want) <= atol + rtol * np.abs(want)))
    if name == "psi" and x is not None:
        bad &= ~near_negative_pole(np.asarray(x))
    if np.any(bad):
        i = np.flatnonzero(bad)[:4]
        at = "" if x is None else f" at {np.asarray(x).reshape(-1)[i]}"
        pytest.fail(f"{name}: {got.reshape(-1)[i]} vs SciPy {want.reshape(-1)[i]}{at}")


def _skip_mlir(backend: str) -> None:
    if backend == "mlir":
        from support.mlir_cases import MISSING

        if MISSING:
            pytest.skip(f"MLIR tools: {MISSING}")


# -- values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary_values_match_scipy(backend: str, dtype: Any) -> None:
    _skip_mlir(backend)
    names = list(UNARY)
    fns = [getattr(sp, n) for n in names]
    x = GRID.astype(dtype) if dtype == np.float64 else _scipy(GRID.astype, dtype)
    cf = yota.compile(lambda x: tuple(f(x) for f in fns), x, backend=backend)
    for name, got, f in zip(names, cf(x), fns, strict=True):
        assert_like_scipy(got, _scipy(f, x), UNARY[name][0], name, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_values_match_scipy(backend: str) -> None:
    _skip_mlir(backend)
    rng = np.random.default_rng(0)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 1e-300, 1e7])
    a = np.concatenate([np.repeat(edges, edges.size), rng.uniform(-3, 5, 200)])
    b = np.concatenate([np.tile(edges, edges.size), rng.uniform(-3, 5, 200)])
    a[-40:], b[-40:] = 10 ** rng.uniform(-2, 12, 40), 10 ** rng.uniform(-2, 3, 40)
    names = list(BINARY)
    fns = [getattr(sp, n) for n in names]
    cf = yota.compile(lambda a, b: tuple(f(a, b) for f in fns), a, b, backend=backend)
    for name, got, f in zip(names, cf(a, b), fns, strict=True):
        assert_like_scipy(got, _scipy(f, a, b), BINARY[name][0], name)


def test_values_broadcast_with_python_scalars_and_keep_scipys_dtypes() -> None:
    x = np.linspace(0.1, 3, 6, dtype=np.float32).reshape(2, 3)
    f = yota.compile(lambda x: (sp.xlogy(2.0, x), sp.xlogy(x, x[:1]), sp.gammaln(x),
                                sp.betaln(x, 2), np.i0(x), sp.expit(x.T)), x)
    want = (sp.xlogy(2.0, x), sp.xlogy(x, x[:1]), sp.gammaln(x), sp.betaln(x, 2), np.i0(x),
            sp.expit(x.T))
    for got, w in zip(f(x), want, strict=True):
        assert_like_scipy(got, w, 1e-14, "broadcast")


def test_accuracy_against_mpmath() -> None:
    """The special ops' own error, float64, away from the negative-axis zeros: <= 4 ulps
    (the report's table comes from a denser run of the same comparison)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    rng = np.random.default_rng(1)
    pos, wide = rng.uniform(0.05, 12, 40), rng.uniform(-6, 6, 40)
    cases = {"gammaln": (pos, lambda v: mp.log(mp.gamma(v))), "psi": (pos, mp.digamma),
             "erf": (wide, mp.erf), "erfc": (wide, mp.erfc),
             "erfcx": (wide, lambda v: mp.exp(v * v) * mp.erfc(v)),
             "erfinv": (wide / 6.1, mp.erfinv),
             "ndtr": (wide * 6, lambda v: mp.erfc(-v / mp.sqrt(2)) / 2),
             "log_ndtr": (wide * 6, lambda v: mp.log1p(-mp.erfc(v / mp.sqrt(2)) / 2) if v > 0
                          else mp.log(mp.erfc(-v / mp.sqrt(2)) / 2)),
             "i0e": (wide * 3, lambda v: mp.besseli(
                 0, v) * mp.exp(-abs(v))), "i1": (wide * 2, lambda v: mp.besseli(1, v))}
    for name, (x, ref) in cases.items():
        got = yota.compile(getattr(sp, name), x)(x)
        want = np.array([float(ref(mp.mpf(float(v)))) for v in x])
        ulps = np.abs(got - want) / np.spacing(np.abs(want))
        assert np.max(ulps) <= 4, (name, np.max(ulps), x[np.argmax(ulps)])
    a, b = 10 ** rng.uniform(-1, 9, 30), 10 ** rng.uniform(-1, 2, 30)
    got = yota.compile(sp.betaln, a, b)(a, b)
    want = np.array([float(mp.log(mp.beta(mp.mpf(u), mp.mpf(v)))) for u, v in zip(a, b, strict=True)])
    np.testing.assert_allclose(got, want, rtol=2e-14)  # SciPy's: 2e-8 here


# -- gradients ---------------------------------------------------------------------------------
def _regular(rng: np.random.Generator, lo: float, hi: float, n: int = 6) -> np.ndarray:
    return rng.uniform(lo, hi, n)


def _unary_loss_args() -> tuple[Callable[..., Any], list[np.ndarray]]:
    rng = np.random.default_rng(2)
    fns = [getattr(sp, n) for n in UNARY]
    args = [_regular(rng, *dom) for _, dom in UNARY.values()]

    def loss(*xs: Any) -> Any:
        return sum(np.sum(np.sin(f(x))) for f, x in zip(fns, xs, strict=True))

    return loss, args


def _binary_loss_args() -> tuple[Callable[..., Any], list[np.ndarray]]:
    rng = np.random.default_rng(3)
    fns = [getattr(sp, n) for n in BINARY]
    args = [_regular(rng, *d) for _, da, db in BINARY.values() for d in (da, db)]

    def loss(*xs: Any) -> Any:
        return sum(np.sum(np.sin(f(xs[2 * i], xs[2 * i + 1]))) for i, f in enumerate(fns))

    return loss, args


def _python_level_loss_args() -> tuple[Callable[..., Any], list[np.ndarray]]:
    rng = np.random.default_rng(4)
    x, b = rng.normal(size=(3, 4)), rng.uniform(0.5, 2, (1, 4))

    def loss(x: Any, b: Any) -> Any:
        return (np.sum(sp.logsumexp(x, axis=1, b=b)) + np.sum(sp.softmax(x, axis=0) ** 2)
                + np.sum(np.sin(sp.log_softmax(x))) + np.sum(sp.polygamma(2, np.abs(x) + 0.5))
                + np.sum(sp.multigammaln(np.abs(x) + 2, 3)) + sp.logsumexp(x, b=-b * 0.1,
                                                                          return_sign=True)[0])

    return loss, [x, b]


LOSSES = {"unary": _unary_loss_args, "binary": _binary_loss_args,
          "python-level": _python_level_loss_args}


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("which", list(LOSSES))
def test_gradients_match_finite_differences(which: str, backend: str) -> None:
    loss, args = LOSSES[which]()
    val, g = yota.grad(loss, *args, backend=backend)
    assert np.allclose(val, loss(*args), rtol=1e-12)
    assert check_grad(loss, args, g, rtol=1e-6) == len(args)


def test_second_order_matches_finite_differences() -> None:
    from yota.ir.autodiff.check import check_grads

    for which in LOSSES:
        loss, args = LOSSES[which]()
        _, tape = yota.trace(loss, *args)
        check_grads(yota.to_ir(tape), args, order=2, rtol=1e-4, atol=1e-6)


def test_gradient_programs_on_cuda() -> None:
    from support.cuda_cases import emulated_mismatches, nvrtc_compiles
    from yota.ir.autodiff import vjp
    from yota.ir.passes import optimize

    progs = []
    for which in LOSSES:
        loss, args = LOSSES[which]()
        _, tape = yota.trace(loss, *args)
        progs.append((which, optimize(vjp(yota.to_ir(tape), list(range(len(args))))), args))
    nvrtc_compiles([g for _, g, _ in progs])
    bad = emulated_mismatches(progs)
    assert not bad, bad[:3]


def test_gradients_at_the_edges_are_finite_where_scipy_is() -> None:
    """Branches that ``where`` discards see harmless arguments: no NaN gradient from them."""
    x = np.array([0.0, 1e-300, 7.0, -40.0, 40.0])
    for f in (sp.log_ndtr, sp.ndtr, sp.expit, sp.log_expit, sp.erfc, sp.i1, sp.i1e):
        _, g = yota.grad(lambda x, f=f: np.sum(f(x)), x)
        assert np.all(np.isfinite(g[0])), (f.__name__, g[0])
    _, g = yota.grad(lambda x, y: np.sum(sp.xlogy(x, y)), np.array([0.0, 0.0, 2.0]),
                     np.array([0.0, 3.0, 3.0]))
    assert np.all(np.isfinite(g[1])) and g[0][1] == pytest.approx(np.log(3.0))


# -- the Python-level functions ---------------------------------------------------------------
LSE_CASES = [dict(axis=None), dict(axis=0), dict(axis=-1, keepdims=True), dict(axis=(0, 2)),
             dict(axis=1, b="b"), dict(axis=1, b="neg", return_sign=True),
             dict(axis=None, b="neg", return_sign=True, keepdims=True)]


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("kw", LSE_CASES, ids=[str(k) for k in LSE_CASES])
def test_logsumexp_keywords(kw: dict[str, Any], backend: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 4)) * 3
    x[0, 0, :] = -np.inf  # an all -inf row: -inf
    x[1, 2, 1] = np.inf
    bs = {"b": rng.uniform(0.1, 2, (3, 1)), "neg": rng.normal(size=(4,))}
    kw = {k: bs.get(v, v) if k == "b" else v for k, v in kw.items()}
    got = yota.compile(lambda x: sp.logsumexp(x, **kw), x, backend=backend)(x)
    want = _scipy(sp.logsumexp, x, **kw)
    for g, w in zip(*(([v] if not isinstance(v, tuple) else v) for v in (got, want)),
                    strict=True):
        assert_like_scipy(np.asarray(g), np.asarray(w, dtype=np.float64), 1e-14, "logsumexp")


def test_logsumexp_edges() -> None:
    empty = np.zeros((2, 0))
    got = yota.compile(lambda x: sp.logsumexp(x, axis=1, return_sign=True), empty)(empty)
    np.testing.assert_array_equal(got, sp.logsumexp(empty, axis=1, return_sign=True))
    x = np.array([1.0, 2.0])  # b makes the sum negative: NaN without return_sign
    got = yota.compile(lambda x: sp.logsumexp(x, b=[1.0, -1.0]), x)(x)
    assert np.isnan(got) and np.isnan(_scipy(sp.logsumexp, x, b=[1.0, -1.0]))
    s = np.float32(3.0)
    assert yota.compile(lambda s: sp.logsumexp(s), s)(s) == pytest.approx(3.0)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
def test_softmax_and_log_softmax(axis: Any) -> None:
    x = np.array([[1.0, 1000.0, -np.inf], [0.5, -2.0, 3.0]])
    f = yota.compile(lambda x: (sp.softmax(x, axis=axis), sp.log_softmax(x, axis=axis)), x)
    for got, want in zip(f(x), (sp.softmax(x, axis=axis), sp.log_softmax(x, axis=axis)),
                         strict=True):
        assert_like_scipy(got, want, 1e-14, "softmax")


def test_polygamma_orders() -> None:
    x = np.array([-2.5, -0.5, 0.25, 1.0, 3.5, 30.0, np.inf, -3.0, 0.0])
    n = np.array([0, 1, 2, 3, 4, 1, 2, 3, 1])
    f = yota.compile(lambda x: (sp.polygamma(n, x), sp.polygamma(0, x), sp.polygamma(5, x),
                                sp.psi(x)), x)
    want = (sp.polygamma(n, x), sp.polygamma(0, x), sp.polygamma(5, x), sp.psi(x))
    for got, w in zip(f(x), want, strict=True):
        assert_like_scipy(got, w, 1e-11, "polygamma")


def test_multigammaln() -> None:
    a = np.array([3.0, 10.5, 100.0])
    got = yota.compile(lambda a: sp.multigammaln(a, 4), a)(a)
    assert_like_scipy(got, sp.multigammaln(a, 4), 1e-13, "multigammaln")
    with pytest.raises(ValueError, match="condition a"):  # SciPy's check, on the example
        yota.grad(lambda a: np.sum(sp.multigammaln(a, 4)), np.array([0.5]))


def test_softplus_sinc_and_np_i0() -> None:
    x = np.array([-50.0, -1.0, 0.0, 2.0, 800.0])
    got = yota.compile(lambda x: (sp.softplus(x), sp.sinc(x), np.i0(x / 100)), x)(x)
    for g, w in zip(got, (sp.softplus(x), sp.sinc(x), np.i0(x / 100)), strict=True):
        assert_like_scipy(g, w, 1e-14, "softplus/sinc/i0")


# -- names, errors, no lasting patches ---------------------------------------------------------
def test_the_tape_names_scipys_functions() -> None:
    from scipy.special import logsumexp  # bound before the trace, as users do

    _, tape = yota.trace(lambda x: logsumexp(sp.gammaln(x), axis=0) + np.sum(sp.expit(x)),
                         np.ones(3))
    text = str(tape)
    for name in ("scipy.special.logsumexp", "scipy.special.gammaln", "scipy.special.expit"):
        assert name in text


def test_unsupported_functions_are_named_at_the_users_line() -> None:
    with pytest.raises(yota.YotaError, match=r"scipy\.special\.jv .*test_scipy_special"):
        yota.grad(lambda x: np.sum(sp.jv(1.0, x)), np.ones(3))
    with pytest.raises(yota.YotaError, match=r"scipy\.special\.logsumexp .*Yota supports"):
        yota.grad(lambda x: sp.logsumexp(x, bad_keyword=1), np.ones(3))
    with pytest.raises(yota.YotaError, match="order must be a constant"):
        yota.grad(lambda x, n: np.sum(sp.polygamma(n, x)), np.ones(3), np.array(1.0))


def test_scipy_is_left_as_it_was() -> None:
    from scipy.special import _logsumexp

    code = sp.logsumexp.__code__
    yota.grad(lambda x: sp.logsumexp(x), np.ones(3))
    assert sp.logsumexp.__code__ is code and code.co_filename == _logsumexp.__file__
    assert "__yota_foreign__" not in _logsumexp.__dict__
    assert list(inspect.signature(sp.logsumexp).parameters)[:2] == ["a", "axis"]
    assert sp.logsumexp(np.zeros(2)) == pytest.approx(np.log(2.0))
