"""``scipy.linalg`` traced (``yota.numpy.scipy_linalg`` through ``yota.foreign``): values
against SciPy's on the interpreter and llvm (batches, 1-D right-hand sides, float32,
size 1, empty, non-contiguous inputs), gradients against finite differences, the
gradient programs on the CUDA emulation and on mlir, SciPy's errors with the user's
line, ``expm``'s guarded number of squarings, and SciPy left as it was.

Gauge-dependent results (eigenvectors, singular vectors) are compared through gauge-free
products (``V diag(w) Vᵀ``, ``U diag(s) Vᵀ``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.linalg as sl
from scipy.linalg import cho_factor, cho_solve, expm
from support.gradcheck import check_grad
from support.mlir_cases import needs_mlir  # noqa: E402

import yota

BACKENDS = ["interp", "llvm"]
R = np.random.default_rng(0)


def general(n: int, *batch: int, seed: int = 0) -> np.ndarray:
    r = np.random.default_rng(seed)
    return r.standard_normal(batch + (n, n)) + 2.5 * np.eye(n)


def spd(n: int, *batch: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return q @ np.swapaxes(q, -1, -2) + n * np.eye(n)


def noncontig(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


def messy(a: np.ndarray, lower: bool, seed: int = 3) -> np.ndarray:
    """``a``'s triangle (``lower`` names it); noise in the other, which must not matter."""
    noise = np.random.default_rng(seed).standard_normal(a.shape)
    return np.tril(a) + np.triu(noise, 1) if lower else np.triu(a) + np.tril(noise, -1)


def _eig_view(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)


A, B, b1, S = general(4), R.standard_normal((4, 2)), R.standard_normal(4), spd(4)
A3 = general(3, 2, seed=1)
CASES: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "solve_triangular_lower": (lambda a, b: sl.solve_triangular(a, b, lower=True), [A, B]),
    "solve_triangular_T_unit": (lambda a, b: sl.solve_triangular(a, b, trans="T",
                                                                  unit_diagonal=True), [A, b1]),
    "solve_triangular_batch": (lambda a, b: sl.solve_triangular(a, b, trans=1), [A3, B[:3]]),
    "solve_triangular_f32": (lambda a, b: sl.solve_triangular(a, b, trans=2),
                             [A.astype(np.float32), B.astype(np.float32)]),
    "cholesky_upper": (sl.cholesky, [S]),
    "cholesky_lower_noncontig": (lambda a: sl.cholesky(a, lower=True), [noncontig(S)]),
    "cholesky_batch": (sl.cholesky, [spd(3, 2)]),
    "cho_factor": (lambda a: cho_factor(a)[0], [S]),
    "cho_factor_lower": (lambda a: cho_factor(a, lower=True)[0], [S]),
    "cho_solve": (lambda a, b: cho_solve(cho_factor(a), b), [messy(S, False), B]),
    "cho_solve_lower_vector": (lambda a, b: cho_solve(cho_factor(a, True), b),
                               [messy(S, True), b1]),
    "lu_factor": (sl.lu_factor, [A]),
    "lu_solve": (lambda a, b: sl.lu_solve(sl.lu_factor(a), b), [A, B]),
    "lu_solve_trans": (lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1), [A, b1]),
    "solve": (sl.solve, [A, B]),
    "solve_vector": (sl.solve, [A, b1]),
    "solve_transposed": (lambda a, b: sl.solve(a, b, transposed=True), [A, B]),
    "solve_batch_broadcast": (sl.solve, [A3, b1[:3]]),
    "solve_1x1": (sl.solve, [np.array([[2.0]]), B[:1]]),
    "solve_pos": (lambda a, b: sl.solve(a, b, assume_a="pos"), [messy(S, False), B]),
    "solve_pos_lower": (lambda a, b: sl.solve(a, b, assume_a="pos", lower=True),
                        [messy(S, True), B]),
    "solve_sym": (lambda a, b: sl.solve(a, b, assume_a="sym"), [messy(S, False), B]),
    "solve_her_lower": (lambda a, b: sl.solve(a, b, assume_a="her", lower=True),
                        [messy(S, True), B]),
    "solve_diagonal": (lambda a, b: sl.solve(a, b, assume_a="diagonal"), [np.diag(np.diag(A)), B]),
    "solve_tridiagonal": (lambda a, b: sl.solve(a, b, assume_a="tridiagonal"),
                          [np.triu(np.tril(A, 1), -1), B]),
    "solve_upper_triangular": (lambda a, b: sl.solve(a, b, assume_a="upper triangular"),
                               [np.triu(A), B]),
    "solve_banded": (lambda a, b: sl.solve(a, b, assume_a="banded"), [np.triu(np.tril(A, 1), -2),
                                                                     B]),
    "inv": (sl.inv, [A]),
    "inv_pos": (lambda a: sl.inv(a, assume_a="pos"), [S]),
    "inv_f32": (sl.inv, [A.astype(np.float32)]),
    "det": (sl.det, [A]),
    "det_batch": (sl.det, [A3]),
    "eigh_values": (lambda a: sl.eigh(a)[0], [S]),
    "eigh_vectors_upper": (lambda a: _eig_view(*sl.eigh(a, lower=False)), [messy(S, False)]),
    "eigh_values_only": (lambda a: sl.eigh(a, eigvals_only=True), [S]),
    "eigh_subset": (lambda a: sl.eigh(a, subset_by_index=(1, 2))[0], [S]),
    "eigh_generalized": (lambda a, b: sl.eigh(a, b)[0], [S, spd(4, seed=2)]),
    "eigh_generalized_vectors": (lambda a, b: _eig_view(*sl.eigh(a, b)), [S, spd(4, seed=2)]),
    "eigh_type2": (lambda a, b: sl.eigh(a, b, type=2, eigvals_only=True), [S, spd(4, seed=2)]),
    "eigh_type3_upper": (lambda a, b: sl.eigh(a, b, type=3, lower=False)[0],
                         [S, spd(4, seed=2)]),
    "svd_values": (lambda a: sl.svd(a, compute_uv=False), [A[:, :3]]),
    "svd_product": (lambda a: (lambda u, s, vt: (u * s) @ vt)(*sl.svd(a, full_matrices=False)),
                    [A[:, :3]]),
    "svd_gesvd": (lambda a: sl.svd(a, compute_uv=False, lapack_driver="gesvd"), [A[:3]]),
    "expm": (expm, [A * 0.3]),
    "expm_squarings": (expm, [A * 3.0]),
    "expm_batch": (expm, [A3 * 0.5]),
    "expm_f32": (expm, [(A * 0.5).astype(np.float32)]),
    "expm_1x1": (expm, [np.array([[0.5]])]),
    "block_diag": (lambda a, b, c: sl.block_diag(a, b, c), [A[:2], b1, np.array(2.0)]),
    "block_diag_empty_block": (lambda a, b: sl.block_diag(a, [], b), [A[:2], B]),
}
GRADS = [n for n in CASES if n not in ("solve_triangular_f32", "inv_f32", "expm_f32")]


def _plain(r: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in r] if isinstance(r, (tuple, list)) else [np.asarray(r)]


def _tol(dt: np.dtype) -> float:
    return 2e-5 if dt == np.float32 else 1e-10


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_scipy(name: str, backend: str) -> None:
    fn, args = CASES[name]
    want = _plain(fn(*args))
    got = _plain(yota.compile(fn, *args, backend=backend)(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype,
                                                           w.shape)
        scale = max(1.0, float(np.max(np.abs(w), initial=0)))
        np.testing.assert_allclose(g, w, rtol=_tol(w.dtype), atol=_tol(w.dtype) * scale,
                                   err_msg=name)


def _loss(name: str) -> tuple[Callable[..., Any], list[np.ndarray]]:
    """``sum(w * out)`` over ``name``'s float outputs, with fixed random weights."""
    fn, args = CASES[name]
    outs = _plain(fn(*args))
    ws = [np.random.default_rng(7).standard_normal(o.shape) for o in outs]

    def loss(*xs: Any) -> Any:
        total = 0.0
        for o, w, ref in zip(_plain_traced(fn(*xs)), ws, outs, strict=True):
            if ref.dtype.kind == "f":
                total = total + np.sum(o * w)
        return total
    return loss, args


def _plain_traced(r: Any) -> list[Any]:
    return list(r) if isinstance(r, (tuple, list)) else [r]


@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_finite_differences(name: str) -> None:
    loss, args = _loss(name)
    _, g = yota.grad(loss, *args)
    assert check_grad(loss, args, g, rtol=1e-6, atol=1e-8) >= 1


@pytest.mark.parametrize("name", ["cho_solve", "lu_solve", "solve_pos_lower", "expm_squarings",
                                  "eigh_generalized_vectors", "block_diag"])
def test_gradients_on_the_interpreter(name: str) -> None:
    loss, args = _loss(name)
    _, g = yota.grad(loss, *args, backend="interp")
    assert check_grad(loss, args, g, rtol=1e-6, atol=1e-8) >= 1


def test_second_order_through_expm_and_cho_solve() -> None:
    def f(a: np.ndarray, s: np.ndarray) -> Any:
        return np.sum(expm(a) ** 2) + np.sum(cho_solve(cho_factor(s), a))

    def g(a: np.ndarray, s: np.ndarray) -> Any:
        return np.sum(yota.grad(f, a, s)[1][0] * np.arange(16.0).reshape(4, 4))

    args = [A * 0.3, S]
    _, gg = yota.grad(g, *args)
    assert check_grad(g, args, gg, rtol=1e-5, atol=1e-7) >= 1


# -- other backends ------------------------------------------------------------------------------
def _emulator() -> Any:
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    return EmuDevice()


def test_gradient_programs_on_the_cuda_emulation() -> None:
    """Every gradient program through the cuda backend's steps (one emulated module)."""
    from yota.backends import cuda
    from yota.ir import run

    from yota.pipeline import program_ir

    dev = _emulator()
    progs = []
    for name in GRADS:
        loss, args = _loss(name)
        fn, _ = program_ir(loss, args)
        progs.append((name, fn, [np.asarray(a, float) for a in args]))
    exes = cuda.compile_many([fn for _, fn, _ in progs], device=dev)
    for (name, fn, args), exe in zip(progs, exes, strict=True):
        for w, g in zip(run(fn, *args), exe(*args), strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-9, err_msg=name)


@needs_mlir
@pytest.mark.parametrize("name", ["lu_solve", "cho_solve_lower_vector", "expm", "eigh_subset",
                                  "block_diag"])
def test_gradients_on_mlir(name: str) -> None:
    loss, args = _loss(name)
    v0, g0 = yota.grad(loss, *args)
    v1, g1 = yota.grad(loss, *args, backend="mlir", cache=False)
    assert np.isclose(float(v1), float(v0), rtol=1e-12)
    for x, y in zip(g1, g0, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


# -- edges ----------------------------------------------------------------------------------------
EDGES: list[tuple[Callable[..., Any], list[Any]]] = [
    (sl.det, [np.zeros((0, 0))]), (sl.det, [np.zeros((2, 0, 0))]), (sl.inv, [np.zeros((0, 0))]),
    (sl.cholesky, [np.zeros((0, 0))]), (expm, [np.zeros((0, 0))]), (sl.det, [np.ones((1, 1))]),
    (lambda a, b: sl.solve(a, b), [np.zeros((0, 0)), np.zeros((0, 2))]),
    (sl.inv, [np.array([[2.0]])]), (sl.det, [np.array([[1, 2], [3, 4]])]),
    (expm, [np.array([[0, 1], [-1, 0]])]), (sl.lu_factor, [np.array([[0.0, 1.0], [1.0, 0.0]])]),
    (lambda *a: sl.block_diag(*a), [[], [[]], 1.0]), (lambda: sl.block_diag(), []),
    (sl.det, [np.array([[1.0, 2.0], [2.0, 4.0]])]),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_integer_singular_and_size_one_edges(backend: str) -> None:
    for fn, args in EDGES:
        want = _plain(fn(*args))
        traced = [np.asarray(a, float) if isinstance(a, list) and a else a for a in args]
        got = _plain(yota.compile(fn, *traced, backend=backend)(*traced))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (fn, args, g, w)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_expm_retraces_when_the_norm_needs_other_squarings() -> None:
    f = yota.compile(expm, A * 0.1)
    for scale in (0.1, 0.2, 5.0, 40.0, 0.1):
        np.testing.assert_allclose(f(A * scale), expm(A * scale), rtol=1e-11)
    _, g = yota.grad(lambda a: np.sum(expm(a)), A * 4.0)
    loss = lambda a: np.sum(expm(a))  # noqa: E731
    assert check_grad(loss, [A * 4.0], g, rtol=1e-6, atol=1e-6) == 1


def test_lu_solve_with_pivots_given_as_constants() -> None:
    lu, piv = sl.lu_factor(A)
    f = lambda b: sl.lu_solve((lu, piv), b)  # noqa: E731
    np.testing.assert_allclose(yota.compile(f, B)(B), f(B), rtol=1e-12)
    _, g = yota.grad(lambda b: np.sum(f(b) ** 2), B)
    assert check_grad(lambda b: np.sum(f(b) ** 2), [B], g) == 1


# -- errors ---------------------------------------------------------------------------------------
def chol_sum(a: np.ndarray) -> Any:
    return np.sum(sl.cholesky(a))


def test_not_positive_definite_at_trace_and_run_time() -> None:
    with pytest.raises(yota.LinAlgError, match=r"not positive definite.*scipy\.linalg\.cholesky"
                       r".*test_scipy_linalg\.py"):
        yota.compile(chol_sum, -np.eye(3))
    for backend in BACKENDS:
        f = yota.compile(chol_sum, np.eye(3), backend=backend)
        with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
            f(-np.eye(3))


def test_scipys_own_errors_name_the_line() -> None:
    with pytest.raises(ValueError, match=r"scipy\.linalg\.solve.*test_scipy_linalg\.py.*"
                       "not a recognized matrix structure"):
        yota.compile(lambda a, b: sl.solve(a, b, assume_a="nonsense"), A, B)
    with pytest.raises(ValueError, match=r"scipy\.linalg\.solve_triangular"):
        yota.compile(lambda a, b: sl.solve_triangular(a, b), A, B[:3])


def test_unsupported_arguments_say_why() -> None:
    with pytest.raises(yota.UnsupportedError, match="subset_by_value"):
        yota.compile(lambda a: sl.eigh(a, subset_by_value=(0.0, 5.0))[0], S)
    with pytest.raises(yota.UnsupportedError, match="lu_factor"):
        yota.compile(lambda lu, piv, b: sl.lu_solve((lu, piv), b), A,
                     np.arange(4, dtype=np.int32), B)


# -- SciPy as it was -------------------------------------------------------------------------------
def test_scipy_is_restored_and_plain_calls_run_scipy() -> None:
    code = sl.solve.__code__

    def f(a: np.ndarray) -> Any:
        plain = sl.solve(A, B)  # no traced argument: SciPy's own result, inside the trace
        assert isinstance(plain, np.ndarray)
        assert (sl.solve.__code__ is not code) == (not isinstance(a, np.ndarray))
        return np.sum(sl.solve(a, B)) + np.sum(plain)

    np.testing.assert_allclose(yota.compile(f, A)(A), f(A), rtol=1e-12)
    assert sl.solve.__code__ is code
    np.testing.assert_allclose(sl.solve(A, B), np.linalg.solve(A, B), rtol=1e-12)


def test_another_thread_calls_scipy_while_a_trace_runs() -> None:
    got: list[Any] = []
    started, done = threading.Event(), threading.Event()

    def other() -> None:
        started.wait(10)
        got.append(sl.inv(A))
        done.set()

    def f(a: np.ndarray) -> Any:
        started.set()
        done.wait(10)  # the other thread calls scipy while this trace runs
        return np.sum(sl.inv(a))

    t = threading.Thread(target=other)
    t.start()
    yota.compile(f, A)
    t.join()
    np.testing.assert_allclose(got[0], np.linalg.inv(A), rtol=1e-12)


def test_importing_yota_imports_no_scipy() -> None:
    code = ("import sys, numpy as np, yota; yota.grad(lambda x: np.sum(x * x), np.ones(3)); "
            "print(any(m == 'scipy' or m.startswith('scipy.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False", out.stderr
