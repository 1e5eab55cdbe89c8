"""``np.linalg`` (``yota.numpy.linalg`` over the LAPACK-level ops): values against NumPy on
the interpreter and on llvm, gradients against finite differences (first and second
order), and NumPy's ``LinAlgError`` for bad input, at trace time and at run time.

Tolerances. The interpreter runs NumPy's own routine for ``solve``, ``inv``, ``cholesky``,
``eigh``, ``svdvals`` and ``qr``: the same bits as NumPy (``test_interp_is_numpys_own``).
Otherwise a backward-stable factorization moves the result by ``c n eps`` relative to the
operands, times the condition number of the matrix (``cond``, measured per case; the
inputs are well conditioned: ``cond`` < 100); ``c = 50`` leaves room for the blocking and
the pivot order of another LAPACK. Gauge-dependent outputs (eigenvectors, singular
vectors) are compared through gauge-free quantities: ``V diag(w) Vᵀ``, ``U diag(s) Vᵀ``,
projectors ``U Uᵀ``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad
from yota.ir import Builder, TensorType, run
from yota.ir.autodiff.check import check_grads, weighted_sum

import yota

BACKENDS = ["interp", "llvm"]
F32, F64 = np.float32, np.float64


# -- inputs ------------------------------------------------------------------------------------
def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def general(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Well-conditioned square (or rectangular) matrices: Q1 diag(1..3) Q2 (vectors:
    entries of size 1 to 2)."""
    r = rng(seed)
    if len(shape) < 2:
        return r.uniform(1.0, 2.0, shape) * r.choice([-1.0, 1.0], shape)
    *batch, m, n = shape
    k = min(m, n)
    q1 = np.linalg.qr(r.standard_normal((*batch, m, m)))[0][..., :, :k]
    q2 = np.linalg.qr(r.standard_normal((*batch, n, n)))[0][..., :k, :]
    s = r.uniform(1.0, 3.0, (*batch, k))
    return (q1 * s[..., None, :]) @ q2


def spd(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Symmetric positive definite, eigenvalues in [1, 4], well separated enough."""
    r = rng(seed)
    *batch, n, _ = shape
    q = np.linalg.qr(r.standard_normal((*batch, n, n)))[0]
    w = np.linspace(1.0, 4.0, n) + r.uniform(0, 0.1, (*batch, n))
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def noncontig(a: np.ndarray) -> np.ndarray:
    """The same values, as a transposed view of a copy (not C-contiguous)."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


def cond(*arrays: np.ndarray) -> float:
    out = 1.0
    for a in arrays:
        a = np.asarray(a, np.float64)
        if a.ndim >= 2 and a.size:
            out = max(out, float(np.max(np.linalg.cond(a))))
    return out


# -- gauge-free views of results -----------------------------------------------------------------
def _sym(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)


def eigh_view(r: Any) -> list[np.ndarray]:
    w, v = r
    return [w, _sym(v, w), _sym(v, np.arange(1.0, w.shape[-1] + 1))]


def svd_view(r: Any) -> list[np.ndarray]:
    u, s, vt = r
    k = s.shape[-1]
    u, vt = u[..., :, :k], vt[..., :k, :]
    return [s, (u * s[..., None, :]) @ vt, u @ np.swapaxes(u, -1, -2)]


def plain(r: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in r] if isinstance(r, tuple) else [np.asarray(r)]


# -- the value table: name -> (function, inputs, view) ---------------------------------------------
Case = tuple[Callable[..., Any], list[np.ndarray], Callable[[Any], list[np.ndarray]]]


def value_cases(dt: Any) -> dict[str, list[Case]]:
    """Every function over shapes: no batch, a batch, broadcast batches, size 1, a
    non-contiguous input."""
    sq = [(3, 3), (2, 4, 4), (1, 1), (2, 1, 2, 2)]
    rect = [(5, 3), (3, 5), (2, 4, 2), (1, 1)]

    def g(s: tuple[int, ...], seed: int = 0) -> np.ndarray:
        return general(s, seed).astype(dt)

    def p(s: tuple[int, ...], seed: int = 0) -> np.ndarray:
        return spd(s, seed).astype(dt)

    la = np.linalg
    return {
        "solve": [(la.solve, [g(s), g(s[:-1] + (2,), 1)], plain) for s in sq]
        + [(la.solve, [g((2, 1, 3, 3)), g((4, 3, 2), 1)], plain),  # broadcast batches
           (la.solve, [g((2, 3, 3)), g((3,), 1)], plain),  # a vector right-hand side
           (la.solve, [noncontig(g((3, 3))), g((3, 3), 1)[:, ::2]], plain)],
        "inv": [(la.inv, [g(s)], plain) for s in sq] + [(la.inv, [noncontig(g((4, 4)))],
                                                          plain)],
        "det": [(la.det, [g(s)], plain) for s in sq],
        "slogdet": [(la.slogdet, [g(s) * np.asarray(-1, dt)], plain) for s in sq],
        "cholesky": [(la.cholesky, [p(s)], plain) for s in sq]
        + [(lambda a: la.cholesky(a, upper=True), [p((2, 3, 3))], plain)],
        "eigh": [(la.eigh, [p(s)], eigh_view) for s in sq]
        + [(lambda a: la.eigh(a, UPLO="U"), [noncontig(p((4, 4)))], eigh_view)],
        "eigvalsh": [(la.eigvalsh, [p(s)], plain) for s in sq],
        "svd": [(lambda a: la.svd(a, full_matrices=False), [g(s)], svd_view) for s in rect]
        + [(la.svd, [g((4, 2))], svd_view), (la.svd, [g((2, 3))], svd_view)],
        "svd_values": [(lambda a: la.svd(a, compute_uv=False), [g(s)], plain) for s in rect],
        "svdvals": [(la.svdvals, [g(s)], plain) for s in rect],
        "qr": [(la.qr, [g(s)], plain) for s in rect if s[-2] >= s[-1]]
        + [(lambda a: la.qr(a, mode="r"), [g((3, 5))], plain)],
        "pinv": [(la.pinv, [g(s)], plain) for s in rect]
        + [(lambda a: la.pinv(a, rtol=1e-3), [g((4, 3))], plain)],
        "lstsq": [(la.lstsq, [g((5, 3)), g((5, 2), 1)], plain),
                  (la.lstsq, [g((5, 3)), g((5, 1), 1)[:, 0]], plain),
                  (la.lstsq, [g((3, 5)), g((3, 2), 1)], plain)],
        "norm": [(lambda x, o=o: la.norm(x, o), [g((4, 3))], plain)
                 for o in (None, 1, 2, np.inf, -np.inf, "fro", "nuc", -1, -2)]
        + [(lambda x, o=o: la.norm(x, o), [g((4, 3))[:, 0]], plain)
           for o in (None, 0, 1, 2, 3, 0.5, -1, -2.5, np.inf, -np.inf)]
        + [(lambda x: la.norm(x, axis=1, keepdims=True), [g((2, 3, 4))], plain),
           (lambda x: la.norm(x, 2, axis=(2, 0)), [g((2, 3, 4))], plain),
           (lambda x: la.norm(x, np.inf, axis=(0, 2), keepdims=True), [g((2, 3, 4))], plain),
           (lambda x: la.norm(x), [g((2, 3, 4))], plain)],
        "vector_norm": [(lambda x: la.vector_norm(x, ord=3, axis=(0, 2)), [g((2, 3, 4))],
                         plain), (lambda x: la.vector_norm(x), [g((3, 3))], plain)],
        "matrix_norm": [(lambda x, o=o: la.matrix_norm(x, ord=o), [g((2, 3, 4))], plain)
                        for o in ("fro", "nuc", 1, -1, 2, -2, np.inf)],
        "cond": [(lambda x, o=o: la.cond(x, o), [g((2, 3, 3))], plain)
                 for o in (None, 2, -2, 1, -1, np.inf, "fro", "nuc")],
        "matrix_rank": [(la.matrix_rank, [g((4, 3))], plain),
                        (la.matrix_rank, [g((4, 3)) @ np.diag([1, 1, 0]).astype(dt)], plain),
                        (lambda x: la.matrix_rank(x, tol=2.0), [g((2, 3, 3))], plain)],
        "matrix_power": [(lambda x, n=n: la.matrix_power(x, n), [g((2, 3, 3))], plain)
                         for n in (0, 1, 3, -1, -2)],
        "multi_dot": [(lambda a, b, c, d: la.multi_dot([a, b, c, d]),
                       [g((4, 6)), g((6, 2), 1), g((2, 5), 2), g((5,), 3)], plain)],
        "tensorinv": [(lambda a: la.tensorinv(a, ind=1), [g((4, 4)).reshape(4, 2, 2)], plain)],
        "tensorsolve": [(la.tensorsolve, [g((6, 6)).reshape(2, 3, 6), g((6,), 1)
                                          .reshape(2, 3)], plain),
                        (lambda a, b: la.tensorsolve(a, b, axes=(0,)),
                         [g((4, 4)).reshape(4, 2, 2), g((4,), 1).reshape(2, 2)], plain)],
    }


def _tolerance(dt: Any, args: list[np.ndarray]) -> float:
    """``50 n eps cond``; a rank-deficient input (matrix_rank) counts as cond 100."""
    n = max([max(a.shape[-2:]) if a.ndim >= 2 else a.size for a in args] + [1])
    c = cond(*args)
    return 50 * n * float(np.finfo(dt).eps) * (c if np.isfinite(c) else 100.0)


def _check_values(name: str, dt: Any, backend: str, every: int = 1) -> int:
    """Compare every ``every``-th case of ``name`` with NumPy; returns how many ran."""
    count = 0
    for fn, args, view in value_cases(dt)[name][::every]:
        want = view(fn(*args))
        got = view(yota.compile(fn, *args, backend=backend)(*args))
        tol = _tolerance(dt, args)
        assert len(got) == len(want)
        for gv, wv in zip(got, want, strict=True):
            assert gv.shape == wv.shape and gv.dtype == wv.dtype, (name, gv, wv)
            if wv.dtype.kind != "f":  # ranks, counts
                np.testing.assert_array_equal(gv, wv)
                continue
            scale = max(1.0, float(np.max(np.abs(wv)))) if wv.size else 1.0
            np.testing.assert_allclose(gv, wv, rtol=tol, atol=tol * scale,
                                       err_msg=f"{name} {[a.shape for a in args]}")
        count += 1
    return count


NAMES = sorted(value_cases(F64))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_values_match_numpy(name: str, backend: str) -> None:
    """Every case on the interpreter; every third on llvm (all of them: the slow sweep)."""
    assert _check_values(name, F64, backend, every=1 if backend == "interp" else 3) >= 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["solve", "det", "cholesky", "eigh", "svd", "norm"])
def test_values_match_numpy_float32(name: str, backend: str) -> None:
    assert _check_values(name, F32, backend, every=2) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_values_match_numpy_all_cases(name: str, backend: str, dt: Any) -> None:
    assert _check_values(name, dt, backend) >= 1


def test_interp_is_numpys_own() -> None:
    """Where the interpreter calls NumPy's routine, the values are NumPy's, bit for bit."""
    a, b = general((2, 4, 4)), general((2, 4, 3), 1)
    p = spd((2, 4, 4))
    for fn, args in [(np.linalg.solve, [a, b]), (np.linalg.inv, [a]),
                     (np.linalg.cholesky, [p]), (lambda x: np.linalg.eigh(x).eigenvalues, [p]),
                     (np.linalg.svdvals, [b]), (lambda x: np.linalg.qr(x).R, [b])]:
        got = yota.compile(fn, *args, backend="interp")(*args)
        assert np.array_equal(got, fn(*args))


def test_results_are_numpys_named_tuples() -> None:
    a = spd((3, 3))
    sl = yota.compile(np.linalg.slogdet, a)(a)
    assert type(sl) is type(np.linalg.slogdet(a))
    assert float(sl.sign) == 1.0 and np.isclose(sl.logabsdet, np.linalg.slogdet(a).logabsdet)

    def uses_fields(a: np.ndarray) -> Any:
        e = np.linalg.eigh(a)
        u = np.linalg.svd(a)
        return e.eigenvalues.sum() + u.S.sum() + np.linalg.qr(a).R.sum()

    want = uses_fields(a)
    assert np.isclose(yota.compile(uses_fields, a)(a), want)


def test_singular_det_and_slogdet() -> None:
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    for backend in BACKENDS:
        assert yota.compile(np.linalg.det, a, backend=backend)(a) == 0.0
        sign, logdet = yota.compile(np.linalg.slogdet, a, backend=backend)(a)
        assert sign == 0.0 and logdet == -np.inf
    perm = np.eye(4)[[2, 0, 3, 1]]  # an odd permutation: det -1
    assert yota.compile(np.linalg.det, perm)(perm) == pytest.approx(np.linalg.det(perm))


EDGES: list[tuple[Callable[..., Any], list[np.ndarray]]] = [
    (np.linalg.inv, [np.zeros((0, 0))]), (np.linalg.det, [np.zeros((2, 0, 0))]),
    (np.linalg.slogdet, [np.zeros((0, 0))]), (np.linalg.cholesky, [np.zeros((0, 0))]),
    (np.linalg.solve, [np.zeros((0, 0)), np.zeros((0, 2))]), (np.linalg.eigh, [np.ones((1, 1))]),
    (np.linalg.svd, [np.zeros((0, 3))]), (np.linalg.svdvals, [np.zeros((2, 0))]),
    (np.linalg.qr, [np.zeros((3, 0))]), (np.linalg.pinv, [np.zeros((0, 3))]),
    (np.linalg.norm, [np.zeros((0, 3))]), (np.linalg.det, [np.array([[1, 2], [3, 4]])]),
    (np.linalg.inv, [np.array([[1, 2], [3, 4]])]), (np.linalg.matrix_rank, [np.zeros((3, 3))]),
    (np.linalg.matrix_rank, [np.array([1.0, 0.0])]), (np.linalg.cond, [np.diag([1.0, 1, 0])]),
    (lambda a: np.linalg.cond(a, 1), [np.diag([1.0, 1, 0])]),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_integer_and_singular_edges(backend: str) -> None:
    """Empty matrices, integer input (float64 results), rank 0, cond of a singular matrix
    (inf, as NumPy): the dtype, shape and values NumPy gives."""
    for fn, args in EDGES:
        want, got = fn(*args), yota.compile(fn, *args, backend=backend)(*args)
        for g, w in zip(plain(got), plain(want), strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (fn, args)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_nan_propagates_as_in_numpy() -> None:
    a = general((3, 3))
    bad = a.copy()
    bad[1, 1] = np.nan
    for backend in BACKENDS:
        assert np.isnan(yota.compile(np.linalg.det, a, backend=backend)(bad))
        assert np.isnan(yota.compile(lambda x: np.linalg.norm(x), a, backend=backend)(bad))
        got = yota.compile(np.linalg.cholesky, spd((3, 3)), backend=backend)(bad)
        np.testing.assert_allclose(got, np.linalg.cholesky(bad), rtol=1e-12, equal_nan=True)


# -- errors --------------------------------------------------------------------------------------
def _line_of(fn: Callable[..., Any]) -> str:
    return f"test_linalg.py:{fn.__code__.co_firstlineno + 1}"


def inverse_sum(a: np.ndarray) -> Any:
    return np.linalg.inv(a).sum()


def solve_sum(a: np.ndarray, b: np.ndarray) -> Any:
    return np.linalg.solve(a, b).sum()


def cholesky_sum(a: np.ndarray) -> Any:
    return np.linalg.cholesky(a).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_linalg_errors_at_run_time(backend: str) -> None:
    """Yota's LinAlgError (also NumPy's) with NumPy's message and the user's line."""
    a, b = general((3, 3)), general((3, 2), 1)
    cases = [(inverse_sum, [a], [np.zeros((3, 3))], "Singular matrix"),
             (solve_sum, [a, b], [np.ones((3, 3)), b], "Singular matrix"),
             (cholesky_sum, [spd((3, 3))], [-np.eye(3)], "Matrix is not positive definite")]
    for fn, ok, bad, message in cases:
        compiled = yota.compile(fn, *ok, backend=backend)
        with pytest.raises(yota.LinAlgError) as err:
            compiled(*bad)
        assert isinstance(err.value, np.linalg.LinAlgError)
        assert message in str(err.value) and _line_of(fn) in str(err.value), str(err.value)
        with pytest.raises(np.linalg.LinAlgError, match=message):
            yota.grad(fn, *bad, backend=backend)


def test_linalg_errors_at_trace_time() -> None:
    """A singular example, or a matrix that is not square: at trace time, with the line."""
    with pytest.raises(yota.LinAlgError, match="Singular matrix") as err:
        yota.compile(inverse_sum, np.zeros((2, 2)))
    assert _line_of(inverse_sum) in str(err.value)
    for fn, args in [(inverse_sum, [np.ones((2, 3))]), (cholesky_sum, [np.ones((2, 2, 3))]),
                     (solve_sum, [np.ones((3, 2)), np.ones(3)])]:
        with pytest.raises(yota.LinAlgError, match="Last 2 dimensions of the array must be "
                           "square") as err:
            yota.grad(fn, *args)
        assert _line_of(fn) in str(err.value) and "np.linalg." in str(err.value)
    with pytest.raises(yota.LinAlgError, match="at least two-dimensional"):
        yota.compile(np.linalg.det, np.ones(3))


def test_qr_complete_is_refused() -> None:
    with pytest.raises(yota.UnsupportedError, match="reduced"):
        yota.compile(lambda a: np.linalg.qr(a, mode="complete"), np.ones((4, 2)))


# -- gradients -------------------------------------------------------------------------------------
def _weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Fixed weights in [0.5, 1.5] (no generator: a trace would record its draws)."""
    size = int(np.prod(shape))
    return (1.0 + 0.5 * np.cos(np.arange(size) * 0.7 + seed)).reshape(shape)


def _wsum(x: Any, seed: int = 0) -> Any:
    return np.sum(x * _weights(np.shape(x), seed))


def _gauge_free(r: Any, kind: str) -> Any:
    """A loss of eigen/singular results that does not depend on the vectors' signs."""
    if kind == "eigh":
        w, v = r
        c = np.arange(1.0, w.shape[-1] + 1)
        return _wsum(w) + _wsum((v * c) @ np.swapaxes(v, -1, -2), 1)
    u, s, vt = r
    k = s.shape[-1]
    u, vt = u[..., :, :k], vt[..., :k, :]
    return _wsum(s) + _wsum(u @ np.swapaxes(u, -1, -2), 1) + _wsum(
        (u * s[..., None, :]) @ vt, 2) + _wsum(np.swapaxes(vt, -1, -2) @ vt, 3)


GRADS: dict[str, tuple[Callable[..., Any], Callable[[tuple[int, ...]], list[np.ndarray]]]] = {
    "solve": (lambda a, b: _wsum(np.linalg.solve(a, b)),
              lambda s: [general(s), general(s[:-1] + (2,), 1)]),
    "solve_vector": (lambda a, b: _wsum(np.linalg.solve(a, b)),
                     lambda s: [general(s), general((s[-1],), 1)]),
    "inv": (lambda a: _wsum(np.linalg.inv(a)), lambda s: [general(s)]),
    "det": (lambda a: _wsum(np.linalg.det(a)), lambda s: [general(s)]),
    "slogdet": (lambda a: _wsum(np.linalg.slogdet(a)[1]) + _wsum(np.linalg.slogdet(a)[0]),
                lambda s: [general(s)]),
    "cholesky": (lambda a: _wsum(np.linalg.cholesky(a)), lambda s: [spd(s)]),
    "cholesky_sym": (lambda x: _wsum(np.linalg.cholesky(x @ np.swapaxes(x, -1, -2) + 2 *
                                                        np.eye(x.shape[-1]))),
                     lambda s: [general(s)]),
    "cholesky_upper": (lambda a: _wsum(np.linalg.cholesky(a, upper=True)), lambda s: [spd(s)]),
    "eigh": (lambda a: _gauge_free(np.linalg.eigh(a), "eigh"), lambda s: [spd(s)]),
    "eigh_upper": (lambda a: _gauge_free(np.linalg.eigh(a, UPLO="U"), "eigh"),
                   lambda s: [spd(s)]),
    "eigvalsh": (lambda a: _wsum(np.linalg.eigvalsh(a)), lambda s: [spd(s)]),
    "svd": (lambda a: _gauge_free(np.linalg.svd(a, full_matrices=False), "svd"),
            lambda s: [general(s)]),
    "svd_wide": (lambda a: _gauge_free(np.linalg.svd(a, full_matrices=False), "svd"),
                 lambda s: [general(s[:-2] + (s[-1] - 1, s[-1] + 1))]),
    "svd_tall_full": (lambda a: _gauge_free(np.linalg.svd(a), "svd"),
                      lambda s: [general(s[:-2] + (s[-1] + 1, s[-1] - 1))]),
    "svdvals": (lambda a: _wsum(np.linalg.svdvals(a)), lambda s: [general(s)]),
    "qr": (lambda a: _wsum(np.linalg.qr(a).Q) + _wsum(np.linalg.qr(a).R, 1),
           lambda s: [general(s[:-2] + (s[-1] + 1, s[-1]))]),
    "qr_wide": (lambda a: _wsum(np.linalg.qr(a).Q) + _wsum(np.linalg.qr(a).R, 1),
                lambda s: [general(s[:-2] + (s[-1] - 1, s[-1] + 1))]),
    "pinv": (lambda a: _wsum(np.linalg.pinv(a)), lambda s: [general(s[:-1] + (s[-1] - 1,))]),
    "lstsq": (lambda a, b: _wsum(np.linalg.lstsq(a, b)[0]) + _wsum(np.linalg.lstsq(a, b)[1]),
              lambda s: [general((s[-1] + 2, s[-1])), general((s[-1] + 2, 2), 1)]),
    "norm_fro": (lambda a: np.linalg.norm(a), lambda s: [general(s)]),
    "norm_2": (lambda a: _wsum(np.linalg.norm(a, 2, axis=(-2, -1))), lambda s: [general(s)]),
    "norm_nuc": (lambda a: _wsum(np.linalg.norm(a, "nuc", axis=(-2, -1))),
                 lambda s: [general(s)]),
    "norm_1": (lambda a: _wsum(np.linalg.norm(a, 1, axis=(-2, -1))), lambda s: [general(s)]),
    "norm_vec_p": (lambda a: _wsum(np.linalg.norm(a, 3, axis=-1)) + _wsum(
        np.linalg.norm(a, -1.5, axis=-2), 1), lambda s: [general(s)]),
    "cond": (lambda a: _wsum(np.linalg.cond(a)), lambda s: [general(s)]),
    "cond_1": (lambda a: _wsum(np.linalg.cond(a, 1)), lambda s: [general(s)]),
    "matrix_power": (lambda a: _wsum(np.linalg.matrix_power(a, -2)), lambda s: [general(s)]),
    "multi_dot": (lambda a: _wsum(np.linalg.multi_dot([a[..., 0, :], a.T, a, a[..., 0]])),
                  lambda s: [general(s[-2:])]),
}


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)], ids=["unbatched", "batched"])
@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_finite_differences(name: str, shape: tuple[int, ...]) -> None:
    fn, make = GRADS[name]
    args = make(shape)
    _, g = yota.grad(fn, *args)
    assert check_grad(fn, args, g) == len(args)


@pytest.mark.parametrize("name", ["solve", "inv", "det", "slogdet", "cholesky", "eigh", "svd",
                                  "qr", "pinv", "lstsq", "cond_1"])
def test_gradients_on_llvm(name: str) -> None:
    fn, make = GRADS[name]
    args = make((2, 3, 3))
    _, g = yota.grad(fn, *args, backend="llvm")
    _, want = yota.grad(fn, *args, backend="interp")
    assert len(g) == len(want) == len(args)
    for a, b in zip(g, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    assert check_grad(fn, args, g) == len(args)


@pytest.mark.parametrize("name", ["solve", "solve_vector", "inv", "det", "slogdet", "cholesky",
                                  "cholesky_sym", "cholesky_upper", "eigh", "eigh_upper",
                                  "svdvals", "svd", "svd_wide", "svd_tall_full", "qr",
                                  "qr_wide", "pinv", "lstsq", "norm_2", "norm_nuc", "cond_1",
                                  "matrix_power"])
def test_second_order(name: str) -> None:
    """Hessian-vector products (the gradient of <grad f, v>) against finite differences
    of the gradient: the rules' own ops have rules."""
    fn, make = GRADS[name]
    args = make((3, 3) if name == "lstsq" else (2, 3, 3))
    _, tape = yota.trace(fn, *args)
    check_grads(yota.to_ir(tape), args, order=2, rtol=1e-5, atol=1e-7)


def test_repeated_eigenvalues_give_finite_gradients() -> None:
    """Exactly repeated eigenvalues: the gradient of a basis-independent loss (the
    eigenvalues, the projector onto the whole eigenspace) is finite and right."""
    q = np.linalg.qr(rng(5).standard_normal((4, 4)))[0]
    a = (q * np.array([1.0, 2.0, 2.0, 3.0])) @ q.T

    def loss(x: np.ndarray) -> Any:
        w, v = np.linalg.eigh((x + x.T) / 2)  # equal weights on the repeated pair: smooth
        return np.sum(w * np.array([1.0, 2.0, 2.0, 3.0])) + np.sum(v[:, 3:] @ v[:, 3:].T * x)

    _, g = yota.grad(loss, a)
    assert np.all(np.isfinite(g))
    assert check_grad(loss, [a], g) == 1


def test_matrix_rank_has_no_gradient() -> None:
    a = general((3, 3))
    v, g = yota.grad(lambda a: np.sum(a) * np.linalg.matrix_rank(a), a)
    assert float(v) == pytest.approx(3 * np.sum(a))
    np.testing.assert_allclose(g[0], np.full((3, 3), 3.0))


def gp_nll(ls: float, x: np.ndarray, y: np.ndarray) -> Any:
    """A Gaussian process's negative log marginal likelihood (up to a constant)."""
    d = x[:, None, :] - x[None, :, :]
    k = np.exp(-0.5 * np.sum(d * d, axis=-1) / ls**2) + 0.1 * np.eye(len(y))
    low = np.linalg.cholesky(k)
    alpha = np.linalg.solve(low.T, np.linalg.solve(low, y))
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(low)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_solves_with_a_cholesky_factor_are_triangular(backend: str) -> None:
    """``solve(L, b)`` and ``solve(L.T, b)`` with ``L = cholesky(K)`` of the same trace are
    substitutions (no refactorization), with the values and gradients of the general ones."""
    r = rng(7)
    x, y = r.standard_normal((12, 2)), r.standard_normal(12)
    _, tape = yota.trace(gp_nll, 1.3, x, y)
    names = [op.name for op in yota.to_ir(tape).ops]
    assert names.count("triangular_solve") == 2 and "solve" not in names
    v, g = yota.grad(gp_nll, 1.3, x, y, backend=backend)
    assert float(v) == pytest.approx(float(gp_nll(1.3, x, y)), rel=1e-12)
    assert check_grad(gp_nll, [1.3, x, y], g) == 3
    for fn in (lambda m: np.linalg.inv(np.linalg.cholesky(m)),
               lambda m: np.linalg.solve(np.linalg.cholesky(m, upper=True), m)):
        np.testing.assert_allclose(yota.compile(fn, spd((3, 3)), backend=backend)(spd((3, 3))),
                                   fn(spd((3, 3))), rtol=1e-12, atol=1e-12)


# -- the ops' rules directly (IR level): the variants the NumPy surface does not reach -------------
def _ir_loss(make: Callable[..., Any], *args: np.ndarray) -> Any:
    b = Builder("f")
    vals = [b.input(TensorType("f64", a.shape)) for a in args]
    return b.build([weighted_sum(b, make(b, *vals))])


@pytest.mark.parametrize("batch", [(), (2,)], ids=["unbatched", "batched"])
@pytest.mark.parametrize("flags", range(8))
def test_triangular_solve_rule(flags: int, batch: tuple[int, ...]) -> None:
    """Every (lower, transpose, unit_diagonal): first order; both orders with no unit
    diagonal. The triangle the op does not read gets no gradient."""
    lower, tr, unit = bool(flags & 1), bool(flags & 2), bool(flags & 4)
    a, rhs = general(batch + (4, 4)) + 2 * np.eye(4), general(batch + (4, 2), 1)
    fn = _ir_loss(lambda b, x, y: b.triangular_solve(x, y, lower=lower, transpose=tr,
                                                      unit_diagonal=unit), a, rhs)
    g = check_grads(fn, [a, rhs], order=1 if unit else 2)
    ga = run(g, a, rhs)[1]
    unread = np.triu(np.ones((4, 4)), 1 if not unit else 0) if lower else \
        np.tril(np.ones((4, 4)), -1 if not unit else 0)
    assert np.all(ga[..., unread == 1] == 0)


@pytest.mark.parametrize("batch", [(), (3,)], ids=["unbatched", "batched"])
def test_lu_rule(batch: tuple[int, ...]) -> None:
    """The packed factors' gradient (both orders); pivoting happens (rows swapped)."""
    a = general(batch + (4, 4), 2)
    fn = _ir_loss(lambda b, x: b.lu(x)[0], a)
    check_grads(fn, [a], order=2)


def _float32_gradients(name: str, backend: str) -> None:
    fn, make = GRADS[name]
    args = [a.astype(F32) for a in make((3, 3) if name == "lstsq" else (2, 3, 3))]
    _, g = yota.grad(fn, *args, backend=backend)
    _, g64 = yota.grad(fn, *[a.astype(F64) for a in args])
    for x, y in zip(g, g64, strict=True):
        assert x.dtype == F32
        # well-conditioned inputs: a float32 gradient is a few hundred eps from float64's
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-3 * max(1.0, float(np.max(np.abs(y)))))


@pytest.mark.parametrize("name", sorted(GRADS))
def test_float32_gradients(name: str) -> None:
    """float32 in, float32 gradients out, close to the float64 ones (interpreter)."""
    _float32_gradients(name, "interp")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GRADS))
def test_float32_gradients_llvm(name: str) -> None:
    _float32_gradients(name, "llvm")
