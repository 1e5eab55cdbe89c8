"""LAPACK-level linear algebra: factorizations and solves of batches of matrices.

Every op takes float32 or float64 operands of one dtype, batched over equal leading
dimensions ``[...]`` (the NumPy surface broadcasts them first), with the row-major
semantics of ``np.linalg``; every backend implements exactly this:

- ``cholesky(a) -> l``: the lower factor (zeros above the diagonal); reads only the lower
  triangle of ``a``. Not positive definite: ``LinAlgError``.
- ``triangular_solve(a, b) {lower, transpose, unit_diagonal} -> x``: ``op(A) X = B`` with
  ``op(A)`` the named triangle of ``a`` (or its transpose); a zero diagonal gives inf/nan.
- ``lu(a) -> lu, perm``: packed factors (unit-lower L strictly below the diagonal, U on
  and above) and the 0-based row permutation, ``a[..., perm, :] == L @ U``.
- ``solve(a, b) -> x``: ``A X = B``; singular: ``LinAlgError``.
- ``eigh(a) {lower} -> w, v``: ascending eigenvalues, eigenvectors in v's columns.
- ``svd(a) {full_matrices} -> u, s, vt``; ``svdvals(a) -> s``: descending.
- ``qr(a) -> q, r``: the reduced factorization.
- ``pivots(perm) -> piv``: the row interchanges (LAPACK's ``ipiv``, 0-based, as SciPy's
  ``lu_factor`` returns them) that turn ``0..n-1`` into the permutation ``perm [..., n]``
  (``lu``'s): swapping rows ``i`` and ``piv[i]`` for ``i = 0..n-1`` gives ``perm``. Integer
  only, sequential along the last axis (no gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import IRTypeError, LinAlgError
from ..types import TensorType
from .table import OpDef, a_bool, register, types_str

# The messages NumPy's np.linalg raises, one per op that can fail on its input values.
FAILURES = {
    "cholesky": "Matrix is not positive definite",
    "solve": "Singular matrix",
    "eigh": "Eigenvalues did not converge",
    "svd": "SVD did not converge",
    "svdvals": "SVD did not converge",
}


def linalg_error(op: str, loc: str | None) -> LinAlgError:
    """The error of a linear-algebra op that failed on its values: NumPy's message, the
    op, and the user's line. The interpreter and compiled code raise the same text."""
    where = f" at {loc}" if loc else ""
    return LinAlgError(f"{FAILURES[op]} (np.linalg '{op}'{where})")


# -- type inference ---------------------------------------------------------------------------
def _matrix(op: str, t: TensorType, square: bool) -> None:
    if t.dtype.kind != "f" or t.ndim < 2 or (square and t.shape[-1] != t.shape[-2]):
        what = "square matrices [..., n, n]" if square else "matrices [..., m, n]"
        raise IRTypeError(f"'{op}' needs float32 or float64 {what}; got {t}")


def _square(op: str) -> Callable[[list[TensorType], dict[str, Any]], TensorType]:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        _matrix(op, types[0], True)
        return types[0]
    return infer


def _with_rhs(op: str) -> Callable[[list[TensorType], dict[str, Any]], TensorType]:
    """``a [..., n, n]`` and ``b [..., n, k]`` -> ``x [..., n, k]``."""
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        a, b = types
        _matrix(op, a, True)
        if (b.dtype != a.dtype or b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]
                or b.shape[-2] != a.shape[-1]):
            raise IRTypeError(f"'{op}' needs a [..., n, n] and b [..., n, k] of one float "
                              f"dtype with equal batch dimensions; got {types_str(types)}")
        return b
    return infer


def _lu_infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    a = types[0]
    _matrix("lu", a, True)
    return a, TensorType(np.dtype(np.int64), a.shape[:-1])


def _eigh_infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    a = types[0]
    _matrix("eigh", a, True)
    return a.with_shape(a.shape[:-1]), a


def _svd_infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    a = types[0]
    _matrix("svd", a, False)
    *batch, m, n = a.shape
    k = min(m, n)
    bt = tuple(batch)
    um, vn = (m, n) if attrs["full_matrices"] else (k, k)
    return (a.with_shape(bt + (m, um)), a.with_shape(bt + (k,)), a.with_shape(bt + (vn, n)))


def _svdvals_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    a = types[0]
    _matrix("svdvals", a, False)
    return a.with_shape(a.shape[:-2] + (min(a.shape[-2:]),))


def _qr_infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    a = types[0]
    _matrix("qr", a, False)
    *batch, m, n = a.shape
    k = min(m, n)
    return a.with_shape(tuple(batch) + (m, k)), a.with_shape(tuple(batch) + (k, n))


def _pivots_infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
    p = types[0]
    if p.dtype != np.int64 or p.ndim < 1:
        raise IRTypeError(f"'pivots' needs an int64 permutation [..., n]; got {p}")
    return p


# -- NumPy references (the interpreter) ---------------------------------------------------------
def cholesky(a: np.ndarray) -> np.ndarray:
    if a.size == 0:
        return np.zeros_like(a)
    return np.linalg.cholesky(np.tril(a))


def triangular_solve(a: np.ndarray, b: np.ndarray, *, lower: bool, transpose: bool,
                     unit_diagonal: bool) -> np.ndarray:
    """Substitution row by row, vectorized over the batch and the right-hand sides."""
    t = np.tril(a) if lower else np.triu(a)
    if transpose:
        t = np.swapaxes(t, -1, -2)
    forward = lower != transpose  # op(A) is lower triangular
    n = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                 np.result_type(a, b))
    for i in (range(n) if forward else range(n - 1, -1, -1)):
        done = slice(0, i) if forward else slice(i + 1, n)
        r = b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, done], x[..., done, :])
        x[..., i, :] = r if unit_diagonal else r / t[..., i, i, None]
    return x


def lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian elimination with partial pivoting (the first largest |pivot| as LAPACK's
    ``getrf``); a zero pivot column is left as it is (multipliers 0), as ``getrf`` does."""
    f = np.array(a, copy=True)
    *batch, n, _ = f.shape
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), f.shape[:-1]).copy()
    bidx = np.indices(tuple(batch)) if batch else ()
    idx = tuple(bidx)
    for k in range(n):
        p = k + np.argmax(np.abs(f[..., k:, k]), axis=-1)
        rows_k, rows_p = f[idx + (k,)].copy(), f[idx + (p,)].copy()
        f[idx + (k,)], f[idx + (p,)] = rows_p, rows_k
        pk, pp = perm[idx + (k,)].copy(), perm[idx + (p,)].copy()
        perm[idx + (k,)], perm[idx + (p,)] = pp, pk
        piv = f[..., k, k]
        nz = (piv != 0)[..., None]
        col = f[..., k + 1:, k]
        mult = np.where(nz, col / np.where(nz, piv[..., None], 1), col)
        f[..., k + 1:, k] = mult
        f[..., k + 1:, k + 1:] -= mult[..., :, None] * f[..., k, None, k + 1:]
    return f, perm


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, np.result_type(a, b))
    return np.linalg.solve(a, b)


def eigh(a: np.ndarray, *, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    w, v = np.linalg.eigh(a, UPLO="L" if lower else "U")
    return w, v


def svd(a: np.ndarray, *, full_matrices: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, s, vt = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vt


def svdvals(a: np.ndarray) -> np.ndarray:
    return np.linalg.svd(a, compute_uv=False)


def qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q, r = np.linalg.qr(a, mode="reduced")
    return q, r


def pivots(perm: np.ndarray) -> np.ndarray:
    """Replay the permutation as interchanges, step by step, over the whole batch: at step
    ``i`` the element ``perm[i]`` is at position ``pos[perm[i]]``, swapped into place."""
    n = perm.shape[-1]
    m = int(np.prod(perm.shape[:-1], dtype=np.int64))
    p = perm.reshape(m, n)
    rows = np.arange(m)
    cur = np.broadcast_to(np.arange(n, dtype=np.int64), (m, n)).copy()
    pos = cur.copy()  # pos[r, x]: where x is in cur[r]
    out = np.empty((m, n), np.int64)
    for i in range(n):
        j = pos[rows, p[:, i]]
        out[:, i] = j
        a, c = cur[:, i].copy(), cur[rows, j].copy()
        cur[:, i], cur[rows, j] = c, a
        pos[rows, c], pos[rows, a] = i, j
    return out.reshape(perm.shape)


register(OpDef("cholesky", 1, _square("cholesky"), cholesky))
register(OpDef("triangular_solve", 2, _with_rhs("triangular_solve"), triangular_solve,
               attrs={"lower": a_bool, "transpose": a_bool, "unit_diagonal": a_bool}))
register(OpDef("lu", 1, _lu_infer, lu))
register(OpDef("solve", 2, _with_rhs("solve"), solve))
register(OpDef("eigh", 1, _eigh_infer, eigh, attrs={"lower": a_bool}))
register(OpDef("svd", 1, _svd_infer, svd, attrs={"full_matrices": a_bool}))
register(OpDef("svdvals", 1, _svdvals_infer, svdvals))
register(OpDef("qr", 1, _qr_infer, qr))
register(OpDef("pivots", 1, _pivots_infer, pivots))

LAPACK_OPS = ("cholesky", "triangular_solve", "lu", "solve", "eigh", "svd", "svdvals", "qr",
              "pivots")
