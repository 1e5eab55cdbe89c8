"""LAPACK-level programs for the backends' tests: inputs in several layouts (transposed,
strided, a broadcast batch), well-conditioned matrices, the ops that call the routine NumPy
calls (``SAME_ROUTINE``), and a Gaussian process's negative log likelihood through
``yota.grad``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from yota.ir import Builder, Function, TensorType
from yota.ir.verifier import verify

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
ULPS = 8  # the same routine as NumPy's: within ULPS * n * sensitivity (test_linalg_native)


def _input(b: Builder, x: np.ndarray, layout: str) -> tuple[Any, np.ndarray]:
    """An IR input holding ``x`` as ``layout``: the value passed in, and the value the op
    reads (a transpose, a strided slice or a batch broadcast of it)."""
    if layout == "transposed":
        arg = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        v = b.input(TensorType(x.dtype, arg.shape))
        perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
        return b.transpose(v, perm=perm), arg
    if layout == "strided":
        arg = np.zeros(x.shape[:-2] + (2 * x.shape[-2], x.shape[-1]), x.dtype)
        arg[..., ::2, :] = x
        v = b.input(TensorType(x.dtype, arg.shape))
        stop = arg.shape
        step = (1,) * (x.ndim - 2) + (2, 1)
        return b.slice(v, start=(0,) * x.ndim, stop=stop, step=step), arg
    if layout == "broadcast" and x.ndim > 2:
        one = np.ascontiguousarray(x[(0,) * (x.ndim - 2)])
        v = b.input(TensorType(x.dtype, one.shape))
        return b.broadcast(v, shape=x.shape), one
    v = b.input(TensorType(x.dtype, x.shape))
    return v, x


def program(make: Callable[..., Any], xs: list[np.ndarray], layout: str = "plain",
            loc: str | None = None) -> tuple[Function, list[np.ndarray]]:
    b = Builder("t")
    vals, args = zip(*(_input(b, x, layout) for x in xs), strict=True)
    with b.at(loc):
        res = make(b, *vals)
    return verify(b.build(list(res) if isinstance(res, tuple | list) else [res])), list(args)


def spd(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) / shape[-1] + np.eye(shape[-1])).astype(dtype)


def dominant(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype
             ) -> np.ndarray:
    """Diagonally dominant (well-conditioned) matrices, any triangle of them too."""
    x = rng.uniform(-1, 1, shape) / shape[-1]
    return (x + 2 * np.eye(shape[-1])).astype(dtype)


BATCHES = [(), (3,), (2, 2)]
SAME_ROUTINE = {  # op -> (make, inputs from (rng, batch, n, dtype))
    "cholesky": (lambda b, a: b.cholesky(a), lambda r, bt, n, dt: [spd(r, bt + (n, n), dt)]),
    "solve": (lambda b, a, c: b.solve(a, c),
              lambda r, bt, n, dt: [dominant(r, bt + (n, n), dt),
                                    r.standard_normal(bt + (n, 2)).astype(dt)]),
    "eigh_lower": (lambda b, a: b.eigh(a, lower=True),
                   lambda r, bt, n, dt: [spd(r, bt + (n, n), dt)]),
    "eigh_upper": (lambda b, a: b.eigh(a, lower=False),
                   lambda r, bt, n, dt: [spd(r, bt + (n, n), dt) + np.tril(
                       np.ones((n, n), dt), -1)]),  # the ignored triangle differs
    "svd_reduced": (lambda b, a: b.svd(a, full_matrices=False),
                    lambda r, bt, n, dt: [r.standard_normal(bt + (n + 2, n)).astype(dt)]),
    "svd_full_wide": (lambda b, a: b.svd(a, full_matrices=True),
                      lambda r, bt, n, dt: [r.standard_normal(bt + (n, n + 2)).astype(dt)]),
    "svdvals": (lambda b, a: b.svdvals(a),
                lambda r, bt, n, dt: [r.standard_normal(bt + (n, n + 1)).astype(dt)]),
    "qr_tall": (lambda b, a: b.qr(a),
                lambda r, bt, n, dt: [r.standard_normal(bt + (n + 2, n)).astype(dt)]),
    "qr_wide": (lambda b, a: b.qr(a),
                lambda r, bt, n, dt: [r.standard_normal(bt + (n, n + 3)).astype(dt)]),
}


def gp_nll(ell: Any, X: Any, y: Any) -> Any:
    diff = X[:, None, :] - X[None, :, :]
    K = np.exp(np.sum(diff * diff, axis=-1) * (-0.5 / (ell * ell))) + 0.1 * np.eye(len(y))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return 0.5 * np.sum(y * alpha) + np.sum(np.log(np.diagonal(L)))


def gp_args(n: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    return np.asarray(0.8), rng.uniform(-1, 1, (n, 2)), rng.standard_normal(n)


# -- tolerances: a backward error moved to the results by the op's sensitivity -----------
def close(got: np.ndarray, want: np.ndarray, ulps: float) -> None:
    if not want.size:
        return
    eps = float(np.finfo(want.dtype).eps) if want.dtype.kind == "f" else 0.0
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=0, atol=ulps * eps * scale)


def _relgap(v: np.ndarray) -> float:
    """The smallest gap between values of each row (sorted), over the largest value."""
    v = np.sort(v.reshape(-1, v.shape[-1]), axis=-1)
    if v.shape[-1] < 2:
        return 1.0
    return float(np.min(np.diff(v, axis=-1)) / max(np.max(np.abs(v)), 1e-300))


def sensitivity(case: str, a: np.ndarray) -> float:
    """How much the op's results move per unit of backward error, relative to |A|."""
    a = np.asarray(a, np.float64)
    if case.startswith("svd"):
        return 1 / max(_relgap(np.linalg.svd(a, compute_uv=False)), 1e-6)
    if case.startswith("eigh"):
        return 1 / max(_relgap(np.linalg.eigvalsh(a)), 1e-6)
    if a.shape[-1] != a.shape[-2]:
        a = np.swapaxes(a, -1, -2) @ a if a.shape[-2] > a.shape[-1] else a @ np.swapaxes(a, -1, -2)
        return float(np.sqrt(np.max(np.linalg.cond(a))))
    return float(np.max(np.linalg.cond(a)))


# -- failures: LAPACK's, raised as the interpreter raises them ------------------------------
FAILS = {
    "cholesky": (lambda b, a: b.cholesky(a), [np.stack([np.eye(3), -np.eye(3)])],
                 "Matrix is not positive definite"),
    "solve": (lambda b, a, c: b.solve(a, c),
              [np.stack([np.eye(3), np.ones((3, 3))]), np.ones((2, 3, 1))], "Singular matrix"),
    "eigh": (lambda b, a: b.eigh(a, lower=True), [np.full((2, 3, 3), np.nan)],
             "Eigenvalues did not converge"),
    "svd": (lambda b, a: b.svd(a, full_matrices=False), [np.full((2, 3, 2), np.nan)],
            "SVD did not converge"),
    "svdvals": (lambda b, a: b.svdvals(a), [np.full((3, 2), np.nan)], "SVD did not converge"),
}
