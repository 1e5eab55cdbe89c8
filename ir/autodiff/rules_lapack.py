"""Derivative rules of the LAPACK-level ops (``ir/ops/lapack.py``), from the literature.

Each rule is built from ordinary ops (matmul, transpose, triangular_solve, solve, select...)
so the backward pass can itself be differentiated. A rule of an op with several results
(``lu``, ``eigh``, ``svd``, ``qr``) receives one cotangent per result (None where a result
gets none). Notation: ``X̄`` is the cotangent of ``X``, ``sym(X) = (X + Xᵀ)/2``.

- ``solve``, ``triangular_solve``: Giles (2008), §3.1: ``B̄ = op(A)⁻ᵀ X̄``, ``Ā = -B̄ Xᵀ``
  (restricted to the triangle the op reads).
- ``lu``: ``A = Pᵀ L U``; with ``G = tril₋₁(Lᵀ L̄) + triu(Ū Uᵀ)``, ``Ā = Pᵀ L⁻ᵀ G U⁻ᵀ``
  (the reverse of the forward rule ``dL = L tril₋₁(M)``, ``dU = triu(M) U``,
  ``M = L⁻¹ P dA U⁻¹``; Giles' method applied to the factorization).
- ``cholesky``: Murray (2016): ``P = Φ(Lᵀ L̄)`` (lower triangle, halved diagonal),
  ``S = L⁻ᵀ P L⁻¹``; the gradient with respect to the symmetric matrix is ``sym(S)``.
- ``eigh``: ``S = V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ``, ``F_ij = 1/(w_j - w_i)``.
- ``svd``: ``Ā = U [diag(s̄) + (F ∘ (UᵀŪ - ŪᵀU)) S + S (F ∘ (VᵀV̄ - V̄ᵀV))] Vᵀ
  + (I - UUᵀ) Ū S⁻¹ Vᵀ + U S⁻¹ V̄ᵀ (I - VVᵀ)``, ``F_ij = 1/(s_j² - s_i²)`` (Townsend 2016).
- ``qr`` (m >= n): ``M = R R̄ᵀ - Q̄ᵀ Q``, ``Ā = (Q̄ + Q copyltu(M)) R⁻ᵀ``; m < n splits
  ``A = [X | Y]``, ``R = [R₁ | Qᵀ Y]`` and applies the square rule to X (Liao et al. 2019).

The ops that read one triangle of a symmetric matrix (``cholesky`` reads the lower one,
``eigh`` the one ``lower`` names) give the exact derivative of that reading: entries of
the other triangle get 0, and an off-diagonal entry of the read triangle gets
``S_ij + S_ji`` (it stands for both ``a_ij`` and ``a_ji``). For a matrix built symmetric
(``X Xᵀ + λI``) this sums to the usual symmetric gradient.

Repeated eigenvalues / singular values: ``F_ij`` is taken as 0 where ``w_i == w_j``
exactly (so the diagonal, and pairs inside an exactly degenerate eigenspace, contribute
nothing: right for losses that do not depend on the basis chosen inside that space, such
as the eigenvalues or the projector onto the whole space). Distinct but close values give
the large terms the true derivative has. The ``svd`` terms with ``S⁻¹`` (non-square
matrices) are inf/nan where a singular value is 0, as the derivative does not exist.
With ``full_matrices=True`` the columns of U (rows of Vᵀ) beyond min(m, n) are an
arbitrary basis of the complement: their cotangents are ignored (a loss must not depend
on them).
"""

from __future__ import annotations

from typing import Any

from ..core import Builder, Op, Value
from ..ops import iota
from .helpers import add, scale, swap_last
from .registry import Grads, Rule


# -- small matrix helpers (batched over leading dimensions) ------------------------------------
def _eye(b: Builder, like: Value, n: int) -> Value:
    return iota.eye(b, like.shape[:-2] + (n, n), 0, like.dtype)


def _tri(b: Builder, x: Value, k: int, lower: bool) -> Value:
    """``tril(x, k)`` or ``triu(x, k)`` by a 0/1 mask."""
    return b.mul(x, iota.tri(b, x.shape, k, x.dtype, upper=not lower))


def _diag(b: Builder, x: Value) -> Value:
    """The diagonal of square matrices ``[..., n, n]`` as ``[..., n]``."""
    return b.sum(b.mul(x, _eye(b, x, x.shape[-1])), axes=(x.ndim - 1,))


def _diag_embed(b: Builder, v: Value) -> Value:
    """``[..., n]`` as diagonal matrices ``[..., n, n]``."""
    n = v.shape[-1]
    full = v.shape + (n,)
    return b.mul(b.broadcast_to(b.reshape_to(v, v.shape[:-1] + (1, n)), full),
                 iota.eye(b, full, 0, v.dtype))


def _cols(b: Builder, v: Value, like: Value) -> Value:
    """``v [..., n]`` broadcast over the rows of ``like [..., m, n]`` (scales columns)."""
    return b.broadcast_to(b.reshape_to(v, v.shape[:-1] + (1, v.shape[-1])), like.shape)


def _rows(b: Builder, v: Value, like: Value) -> Value:
    """``v [..., m]`` broadcast over the columns of ``like [..., m, n]`` (scales rows)."""
    return b.broadcast_to(b.reshape_to(v, v.shape + (1,)), like.shape)


def _mm(b: Builder, x: Value, y: Value) -> Value:
    return b.matmul(x, y)


def _tsolve(b: Builder, a: Value, x: Value, lower: bool, transpose: bool,
            unit: bool = False) -> Value:
    return b.triangular_solve(a, x, lower=lower, transpose=transpose, unit_diagonal=unit)


def _right_tsolve(b: Builder, a: Value, x: Value, lower: bool, transpose: bool,
                  unit: bool = False) -> Value:
    """``x op(A)⁻¹``: ``(op(A)⁻ᵀ xᵀ)ᵀ``."""
    return swap_last(b, _tsolve(b, a, swap_last(b, x), lower, not transpose, unit))


def _gap_inverse(b: Builder, w: Value, squared: bool = False) -> Value:
    """``F_ij = 1/(w_j - w_i)`` (or ``1/(w_j² - w_i²)``), 0 where the two are equal."""
    if squared:
        w = b.mul(w, w)
    full = w.shape + (w.shape[-1],)
    wj = b.broadcast_to(b.reshape_to(w, w.shape[:-1] + (1, w.shape[-1])), full)
    wi = b.broadcast_to(b.reshape_to(w, w.shape + (1,)), full)
    gap = b.sub(wj, wi)
    zero = b.const(0.0, w.dtype, full)
    same = b.eq(gap, zero)
    safe = b.select(same, b.const(1.0, w.dtype, full), gap)
    return b.select(same, zero, b.reciprocal(safe))


def _read_triangle(b: Builder, s: Value, lower: bool) -> Value:
    """The gradient with respect to the entries of the triangle a symmetric op reads, from
    ``s`` with ``df = <s, dA>`` for symmetric ``dA``: ``tril(s + sᵀ) - diag(s)``."""
    both = add(b, s, swap_last(b, s))
    return b.sub(_tri(b, both, 0, lower), _diag_embed(b, _diag(b, s)))


def _zeros(b: Builder, v: Value) -> Value:
    return b.const(0.0, v.dtype, v.shape)


# -- rules ---------------------------------------------------------------------------------------
def _solve(b: Builder, op: Op, dx: Value) -> Grads:
    a, _ = op.operands
    x = op.result
    db = b.solve(swap_last(b, a), dx)
    return [b.neg(_mm(b, db, swap_last(b, x))), db]


def _triangular_solve(b: Builder, op: Op, dx: Value) -> Grads:
    a, _ = op.operands
    x = op.result
    lower, tr, unit = (op.attrs[k] for k in ("lower", "transpose", "unit_diagonal"))
    db = _tsolve(b, a, dx, lower, not tr, unit)
    da = b.neg(_mm(b, x, swap_last(b, db)) if tr else _mm(b, db, swap_last(b, x)))
    k = (-1 if lower else 1) if unit else 0
    return [_tri(b, da, k, lower), db]


def _cholesky(b: Builder, op: Op, dl: Value) -> Grads:
    low = op.result
    p = _tri(b, _mm(b, swap_last(b, low), dl), 0, True)
    p = b.sub(p, scale(b, _diag_embed(b, _diag(b, p)), 0.5))  # Φ: the diagonal halved
    s = _right_tsolve(b, low, _tsolve(b, low, p, True, True), True, False)
    return [_read_triangle(b, s, True)]


def _lu(b: Builder, op: Op, dys: Any) -> Grads:
    dlu = dys[0]
    if dlu is None:
        return [None]
    f, perm = op.results
    n = f.shape[-1]
    low_bar, up_bar = _tri(b, dlu, -1, True), _tri(b, dlu, 0, False)
    low = add(b, _tri(b, f, -1, True), _eye(b, f, n))
    up = _tri(b, f, 0, False)
    g = add(b, _tri(b, _mm(b, swap_last(b, low), low_bar), -1, True),
            _tri(b, _mm(b, up_bar, swap_last(b, up)), 0, False))
    z = _right_tsolve(b, f, _tsolve(b, f, g, True, True, True), False, True)
    # Pᵀ Z with P the permutation matrix P_ij = [perm_i == j]
    full = perm.shape + (n,)
    cols = iota.arange(b, full, -1, perm.dtype)
    pm = b.convert_to(b.eq(b.broadcast_to(b.reshape_to(perm, perm.shape + (1,)), full), cols),
                      f.dtype)
    return [_mm(b, swap_last(b, pm), z)]


def _eigh(b: Builder, op: Op, dys: Any) -> Grads:
    dw, dv = dys
    w, v = op.results
    inner = _diag_embed(b, dw) if dw is not None else None
    if dv is not None:
        fv = b.mul(_gap_inverse(b, w), _mm(b, swap_last(b, v), dv))
        inner = fv if inner is None else add(b, inner, fv)
    if inner is None:
        return [None]
    s = _mm(b, _mm(b, v, inner), swap_last(b, v))
    return [_read_triangle(b, s, op.attrs["lower"])]


def _svd_core(b: Builder, a: Value, u: Value, s: Value, vt: Value, du: Value | None,
              ds: Value | None, dvt: Value | None) -> Value:
    """Townsend's formula for the reduced SVD ``a = u diag(s) vt``."""
    m, n = a.shape[-2:]
    k = s.shape[-1]
    f = _gap_inverse(b, s, squared=True)
    inner = _diag_embed(b, ds) if ds is not None else _zeros(b, f)
    extra: Value | None = None
    if du is not None:
        j = _mm(b, swap_last(b, u), du)
        inner = add(b, inner, b.mul(b.mul(f, b.sub(j, swap_last(b, j))), _cols(b, s, f)))
        if m > k:  # (I - U Uᵀ) Ū S⁻¹ Vᵀ
            proj = b.sub(du, _mm(b, u, j))
            extra = _mm(b, b.div(proj, _cols(b, s, proj)), vt)
    if dvt is not None:
        dv = swap_last(b, dvt)
        j = _mm(b, vt, dv)
        inner = add(b, inner, b.mul(_rows(b, s, f), b.mul(f, b.sub(j, swap_last(b, j)))))
        if n > k:  # U S⁻¹ V̄ᵀ (I - V Vᵀ)
            proj = b.sub(dvt, _mm(b, swap_last(b, j), vt))
            term = _mm(b, b.div(u, _cols(b, s, u)), proj)
            extra = term if extra is None else add(b, extra, term)
    out = _mm(b, _mm(b, u, inner), vt)
    return out if extra is None else add(b, out, extra)


def _svd(b: Builder, op: Op, dys: Any) -> Grads:
    du, ds, dvt = dys
    a = op.operands[0]
    u, s, vt = op.results
    k = s.shape[-1]
    if op.attrs["full_matrices"]:
        m, n = a.shape[-2:]
        nb = a.ndim - 2
        u = _cut(b, u, (m, k), nb)
        vt = _cut(b, vt, (k, n), nb)
        du = _cut(b, du, (m, k), nb) if du is not None else None
        dvt = _cut(b, dvt, (k, n), nb) if dvt is not None else None
    return [_svd_core(b, a, u, s, vt, du, ds, dvt)]


def _cut(b: Builder, x: Value, mn: tuple[int, int], nb: int) -> Value:
    """The leading ``[m, n]`` block of the last two axes."""
    if x.shape[-2:] == mn:
        return x
    return b.slice(x, start=(0,) * x.ndim, stop=x.shape[:nb] + mn, step=(1,) * x.ndim)


def _svdvals(b: Builder, op: Op, ds: Value) -> Grads:
    u, _, vt = b.svd(op.operands[0], full_matrices=False)
    return [_mm(b, b.mul(u, _cols(b, ds, u)), vt)]


def _qr_square(b: Builder, q: Value, r: Value, dq: Value, dr: Value | None) -> Value:
    """``Ā = (Q̄ + Q copyltu(M)) R⁻ᵀ``, ``M = R R̄ᵀ - Q̄ᵀ Q`` (m >= n, R square)."""
    m = b.neg(_mm(b, swap_last(b, dq), q))
    if dr is not None:
        m = add(b, m, _mm(b, r, swap_last(b, dr)))
    low = _tri(b, m, -1, True)
    copyltu = add(b, add(b, low, swap_last(b, low)), _diag_embed(b, _diag(b, m)))
    return _right_tsolve(b, r, add(b, dq, _mm(b, q, copyltu)), False, True)


def _qr(b: Builder, op: Op, dys: Any) -> Grads:
    dq, dr = dys
    a = op.operands[0]
    q, r = op.results
    m, n = a.shape[-2:]
    nb = a.ndim - 2
    dq = dq if dq is not None else _zeros(b, q)
    if m >= n:
        return [_qr_square(b, q, r, dq, dr)]
    # A = [X | Y] with X square: R = [R1 | Qᵀ Y]
    x_r = _cut(b, r, (m, m), nb)
    y = b.slice(a, start=(0,) * nb + (0, m), stop=a.shape, step=(1,) * a.ndim)
    dr1 = _cut(b, dr, (m, m), nb) if dr is not None else None
    if dr is not None:
        dr2 = b.slice(dr, start=(0,) * nb + (0, m), stop=dr.shape, step=(1,) * dr.ndim)
        dq = add(b, dq, _mm(b, y, swap_last(b, dr2)))
        dy = _mm(b, q, dr2)
    else:
        dy = b.const(0.0, a.dtype, y.shape)
    dx = _qr_square(b, q, x_r, dq, dr1)
    return [b.concatenate(dx, dy, axis=a.ndim - 1)]


RULES_LAPACK: dict[str, Rule] = {
    "solve": _solve,
    "triangular_solve": _triangular_solve,
    "cholesky": _cholesky,
    "lu": _lu,
    "eigh": _eigh,
    "svd": _svd,
    "svdvals": _svdvals,
    "qr": _qr,
}
