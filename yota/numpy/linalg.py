"""``np.linalg``: norms, solves, inverses, determinants, factorizations and what is built
on them, as compositions of the LAPACK-level IR ops (``yota.ir.ops.lapack``) with the
ordinary ones.

Batch dimensions broadcast as NumPy's; every lowering ends with the shape NumPy gave
(``keepdims`` and 1-D right-hand sides are reshapes). What each function is made of:

=================== =====================================================================
``solve``, ``inv``  the ``solve`` op (``inv`` solves against the identity); with a
                    Cholesky factor of the same trace (or its transpose), ``triangular_solve``
``det``, ``slogdet`` the ``lu`` op: the product of U's diagonal, the permutation's parity
``cholesky``        the ``cholesky`` op (``upper=True``: of the transpose, transposed)
``eigh``            the ``eigh`` op; ``eigvalsh`` its eigenvalues
``svd``, ``svdvals`` the ``svd`` / ``svdvals`` ops; ``qr`` the ``qr`` op
``pinv``, ``lstsq`` ``svd``: singular values above the cutoff inverted, the rest zeroed
``norm``            sums, maxima, powers; 2, -2 and 'nuc' from ``svdvals``
``cond``            ``svdvals`` (2, -2, None) or norms of an LU-based inverse
``matrix_rank``     a count of ``svdvals`` above the tolerance (no gradient)
``matrix_power``    repeated squaring (a negative power of the inverse)
``multi_dot``       matmuls in the cheapest order (NumPy's chain-order rule)
``tensorsolve``/``tensorinv`` reshapes around ``solve`` / ``inv``
=================== =====================================================================

NumPy's ``LinAlgError`` met while tracing (a non-square matrix, a singular example)
becomes Yota's ``LinAlgError`` (also a ``numpy.linalg.LinAlgError``) with the user's line;
at run time the ops raise it from the interpreter and from compiled code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Value
from yota.ir.errors import LinAlgError, UnsupportedError
from yota.ir.ops import iota
from yota.ir.types import TensorType

from ..userloc import where
from .contractions import matmul_values
from .registry import LoweringContext, register
from .static import normalize_axis, static_value

_UNSET: Any = getattr(np, "_NoValue", None)


def _checked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``fn`` on the example values; its ``LinAlgError`` becomes Yota's, naming the
    function and the user's line."""
    @functools.wraps(fn)
    def forward(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except np.linalg.LinAlgError as e:
            if isinstance(e, LinAlgError):
                raise
            raise LinAlgError(f"{e} (np.linalg.{name} at {where()})") from None
    return forward


def _reg(name: str, forward: Any = None) -> Callable[[Any], Any]:
    fn = getattr(np.linalg, name)
    return register(f"linalg.{name}", _checked(name, forward or fn), fn)


# -- IR helpers ----------------------------------------------------------------------------------
def _swap(b: Builder, x: Value) -> Value:
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return b.transpose(x, perm=perm)


def _eye(b: Builder, dtype: Any, shape: tuple[int, ...]) -> Value:
    return iota.eye(b, shape, 0, dtype)


def _diag(b: Builder, x: Value) -> Value:
    """The diagonal of ``[..., n, n]`` as ``[..., n]``."""
    return b.sum(b.mul(x, _eye(b, x.dtype, x.shape)), axes=(x.ndim - 1,))


def _batched(b: Builder, x: Value, y: Value) -> tuple[Value, Value]:
    """``x [..., n, n]`` and ``y [..., n, k]`` with their batch dimensions broadcast."""
    batch = tuple(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
    return b.broadcast_to(x, batch + x.shape[-2:]), b.broadcast_to(y, batch + y.shape[-2:])


def _matrix(L: LoweringContext, a: Any, o: TensorType) -> Value:
    return L.operand(a, o.dtype, None)


def _last(x: Value, k: int = 1) -> tuple[int, ...]:
    return tuple(range(x.ndim - k, x.ndim))


def _inv_lu(b: Builder, x: Value) -> Value:
    """``x⁻¹`` from ``lu`` and two triangular solves: never raises (a singular matrix
    gives inf/nan), for ``cond``."""
    f, perm = b.lu(x)
    n = x.shape[-1]
    full = perm.shape + (n,)
    cols = iota.arange(b, full, -1, perm.dtype)
    pm = b.convert_to(b.eq(b.broadcast_to(b.reshape_to(perm, perm.shape + (1,)), full), cols),
                      x.dtype)
    y = b.triangular_solve(f, pm, lower=True, transpose=False, unit_diagonal=True)
    return b.triangular_solve(f, y, lower=False, transpose=False, unit_diagonal=False)


# -- solve, inv, det, slogdet ---------------------------------------------------------------------
def _cholesky_factor(b: Builder, x: Value) -> tuple[Value, bool] | None:
    """``(l, transposed)`` when ``x`` is a Cholesky factor ``l`` computed in this trace, or
    its matrix transpose: a matrix with a positive diagonal (the factorization succeeded),
    so a solve with it is a triangular solve."""
    producer = {r: op for op in b.ops for r in op.results}
    op = producer.get(x)
    if op is not None and op.name == "cholesky":
        return x, False
    if op is not None and op.name == "transpose" and op.attrs["perm"] == \
            tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2):
        inner = producer.get(op.operands[0])
        if inner is not None and inner.name == "cholesky":
            return op.operands[0], True
    return None


def solve_values(b: Builder, x: Value, y: Value) -> Value:
    """``x⁻¹ y`` for ``x [..., n, n]``, ``y [..., n, k]`` (batches broadcast); a Cholesky
    factor (or its transpose) is solved by substitution, not refactored."""
    tri = _cholesky_factor(b, x)
    if tri is not None:
        x = tri[0]
    x, y = _batched(b, x, y)
    if tri is not None:
        return b.triangular_solve(x, y, lower=True, transpose=tri[1], unit_diagonal=False)
    return b.solve(x, y)


@_reg("solve")
def _solve(L: LoweringContext, outs: list[TensorType], a: Any, b: Any) -> Value:
    """NumPy 2: ``b`` is a vector only when it is 1-D, otherwise ``[..., n, k]``."""
    o, bld = outs[0], L.b
    x, y = _matrix(L, a, o), L.operand(b, o.dtype, None)
    if y.ndim == 1:
        y = bld.reshape_to(y, y.shape + (1,))
    return bld.reshape_to(solve_values(bld, x, y), o.shape)


def inverse(b: Builder, x: Value) -> Value:
    return solve_values(b, x, _eye(b, x.dtype, x.shape))


@_reg("inv")
def _inv(L: LoweringContext, outs: list[TensorType], a: Any) -> Value:
    return inverse(L.b, _matrix(L, a, outs[0]))


def _parity_sign(b: Builder, perm: Value, dtype: Any) -> Value:
    """+1 or -1: the sign of the permutation ``perm [..., n]`` (the parity of its number
    of inversions, pairs i < j with perm_i > perm_j)."""
    n = perm.shape[-1]
    full = perm.shape + (n,)
    pi = b.broadcast_to(b.reshape_to(perm, perm.shape + (1,)), full)
    pj = b.broadcast_to(b.reshape_to(perm, perm.shape[:-1] + (1, n)), full)
    upper = iota.tri(b, full, 1, np.bool_, upper=True)
    inv = b.convert_to(b.emit("and", b.gt(pi, pj), upper), dtype)
    count = b.sum(inv, axes=(perm.ndim - 1, perm.ndim))
    odd = b.mod(count, b.const(2.0, dtype, count.shape))
    one = b.const(1.0, dtype, count.shape)
    return b.sub(one, b.add(odd, odd))


def _lu_parts(L: LoweringContext, a: Any, o: TensorType) -> tuple[Value, Value]:
    """U's diagonal and the permutation's sign of ``a``'s LU factorization."""
    x = L.operand(a, o.dtype, None)
    f, perm = L.b.lu(x)
    return _diag(L.b, f), _parity_sign(L.b, perm, o.dtype)


@_reg("det")
def _det(L: LoweringContext, outs: list[TensorType], a: Any) -> Value:
    d, sign = _lu_parts(L, a, outs[0])
    return L.b.mul(sign, L.b.prod(d, axes=_last(d)))


@_reg("slogdet")
def _slogdet(L: LoweringContext, outs: list[TensorType], a: Any) -> list[Value]:
    b = L.b
    d, sign = _lu_parts(L, a, outs[0])
    sign = b.mul(sign, b.prod(b.sign(d), axes=_last(d)))
    return [sign, b.sum(b.log(b.abs(d)), axes=_last(d))]


# -- factorizations --------------------------------------------------------------------------------
@_reg("cholesky")
def _cholesky(L: LoweringContext, outs: list[TensorType], a: Any, *,
              upper: bool = False) -> Value:
    x = _matrix(L, a, outs[0])
    if upper:  # reads the upper triangle: the lower factor of the transpose, transposed
        return _swap(L.b, L.b.cholesky(_swap(L.b, x)))
    return L.b.cholesky(x)


def _lower(uplo: Any) -> bool:
    return str(uplo).upper() == "L"


@_reg("eigh")
def _eigh(L: LoweringContext, outs: list[TensorType], a: Any, UPLO: str = "L") -> list[Value]:
    w, v = L.b.eigh(L.operand(a, outs[1].dtype, None), lower=_lower(UPLO))
    return [w, v]


@_reg("eigvalsh")
def _eigvalsh(L: LoweringContext, outs: list[TensorType], a: Any, UPLO: str = "L") -> Value:
    w, _ = L.b.eigh(L.operand(a, outs[0].dtype, None), lower=_lower(UPLO))
    return w


@_reg("svd")
def _svd(L: LoweringContext, outs: list[TensorType], a: Any, full_matrices: bool = True,
         compute_uv: bool = True, hermitian: bool = False) -> Any:
    """``hermitian=True`` takes the general SVD of the (symmetric) matrix: the same
    singular values; singular vectors may differ from NumPy's by signs (a gauge)."""
    o = outs[-1] if compute_uv else outs[0]
    x = L.operand(a, o.dtype, None)
    if not compute_uv:
        return L.b.svdvals(x)
    u, s, vt = L.b.svd(x, full_matrices=bool(full_matrices))
    return [u, s, vt]


@_reg("svdvals")
def _svdvals(L: LoweringContext, outs: list[TensorType], x: Any) -> Value:
    return L.b.svdvals(L.operand(x, outs[0].dtype, None))


@_reg("qr")
def _qr(L: LoweringContext, outs: list[TensorType], a: Any, mode: str = "reduced") -> Any:
    x = L.operand(a, outs[-1].dtype, None)
    m, n = x.shape[-2:]
    if mode not in ("reduced", "r") and not (mode == "complete" and m <= n):
        raise UnsupportedError(f"np.linalg.qr(..., mode={mode!r}) at {where()}: Yota "
                               "supports the reduced factorization (mode 'reduced' or 'r'; "
                               "'complete' where m <= n, when it is the same)")
    q, r = L.b.qr(x)
    return r if mode == "r" else [q, r]


# -- pinv, lstsq ---------------------------------------------------------------------------------------
def _cutoff_mask(b: Builder, s: Value, rcond: float) -> Value:
    """Singular values above ``rcond * max(s)`` per matrix (bool ``[..., k]``)."""
    k = s.shape[-1]
    smax = b.max(s, axes=_last(s)) if k else b.const(0.0, s.dtype, s.shape[:-1])
    cut = b.mul(b.const(float(rcond), s.dtype, s.shape[:-1]), smax)
    return b.gt(s, b.broadcast_to(b.reshape_to(cut, cut.shape + (1,)), s.shape))


def _inverted(b: Builder, s: Value, big: Value) -> Value:
    """``1/s`` where ``big``, else 0."""
    one, zero = b.const(1.0, s.dtype, s.shape), b.const(0.0, s.dtype, s.shape)
    return b.select(big, b.div(one, b.select(big, s, one)), zero)


def _pinv_of(b: Builder, x: Value, rcond: float) -> Value:
    u, s, vt = b.svd(x, full_matrices=False)
    inv_s = _inverted(b, s, _cutoff_mask(b, s, rcond))
    scaled = b.mul(_swap(b, u), b.broadcast_to(b.reshape_to(inv_s, inv_s.shape + (1,)),
                                               _swap(b, u).shape))
    return b.matmul(_swap(b, vt), scaled)


def _rcond(rcond: Any, rtol: Any, shape: tuple[int, ...], dtype: Any, legacy: float) -> float:
    if rcond is None:
        if rtol is _UNSET:
            return legacy
        return max(shape[-2:]) * float(np.finfo(dtype).eps) if rtol is None else float(rtol)
    return float(rcond)


@_reg("pinv")
def _pinv(L: LoweringContext, outs: list[TensorType], a: Any, rcond: Any = None,
          hermitian: bool = False, *, rtol: Any = _UNSET) -> Value:
    o = outs[0]
    x = L.operand(a, o.dtype, None)
    rc = static_value(L, rcond, "np.linalg.pinv's rcond", "Yota takes it as a constant")
    rt = static_value(L, rtol, "np.linalg.pinv's rtol", "Yota takes it as a constant")
    if np.ndim(rc) or np.ndim(rt):
        raise UnsupportedError("np.linalg.pinv: Yota takes rcond/rtol as one number")
    if 0 in x.shape:
        return L.b.const(0.0, o.dtype, o.shape)
    return _pinv_of(L.b, x, _rcond(rc, rt, x.shape, o.dtype, 1e-15))


@_reg("lstsq")
def _lstsq(L: LoweringContext, outs: list[TensorType], a: Any, b: Any,
           rcond: Any = None) -> list[Value]:
    """The minimum-norm least-squares solution from the SVD (as LAPACK's ``gelsd``);
    residuals (their shape as NumPy gave it while tracing), rank, singular values."""
    bld = L.b
    ox, ores, orank, osv = outs
    x = L.operand(a, ox.dtype, None)
    y = L.operand(b, ox.dtype, None)
    rc = static_value(L, rcond, "np.linalg.lstsq's rcond", "Yota takes it as a constant")
    rc = float(np.finfo(ox.dtype).eps) * max(x.shape[-2:]) if rc is None else float(rc)
    y2 = bld.reshape_to(y, y.shape + (1,)) if y.ndim == 1 else y
    u, s, vt = bld.svd(x, full_matrices=False)
    big = _cutoff_mask(bld, s, rc)
    inv_s = _inverted(bld, s, big)
    uty = bld.matmul(_swap(bld, u), y2)
    scaled = bld.mul(uty, bld.broadcast_to(bld.reshape_to(inv_s, inv_s.shape + (1,)),
                                           uty.shape))
    sol = bld.matmul(_swap(bld, vt), scaled)
    rank = bld.convert_to(bld.sum(bld.convert_to(big, np.int64), axes=_last(s)), orank.dtype)
    if ores.size:
        r = bld.sub(bld.matmul(x, sol), y2)
        res = bld.reshape_to(bld.sum(bld.mul(r, r), axes=(r.ndim - 2,)), ores.shape)
    else:
        res = bld.const(0.0, ores.dtype, ores.shape)
    return [bld.reshape_to(sol, ox.shape), res, bld.reshape_to(rank, orank.shape),
            bld.convert_to(s, osv.dtype)]


# -- norms ---------------------------------------------------------------------------------------
def _vector_norm(b: Builder, x: Value, ord: Any, axes: tuple[int, ...]) -> Value:
    """The ``ord``-norm of ``x`` over ``axes`` (NumPy's vector norms)."""
    ax = b.abs(x)
    if ord is None or ord == 2:
        return b.sqrt(b.sum(b.mul(x, x), axes=axes))
    if ord == np.inf:
        return b.max(ax, axes=axes)
    if ord == -np.inf:
        return b.min(ax, axes=axes)
    if ord == 0:
        nz = b.ne(x, b.const(0.0, x.dtype, x.shape))
        return b.sum(b.convert_to(nz, x.dtype), axes=axes)
    if ord == 1:
        return b.sum(ax, axes=axes)
    p = float(ord)
    total = b.sum(b.pow(ax, b.const(p, x.dtype, x.shape)), axes=axes)
    return b.pow(total, b.const(1.0 / p, x.dtype, total.shape))


def _to_end(b: Builder, x: Value, row: int, col: int) -> Value:
    """``x`` with axes ``row``, ``col`` moved last (in that order)."""
    perm = tuple(i for i in range(x.ndim) if i not in (row, col)) + (row, col)
    return x if perm == tuple(range(x.ndim)) else b.transpose(x, perm=perm)


def _matrix_norm(b: Builder, x: Value, ord: Any, row: int, col: int) -> Value:
    """NumPy's matrix norms over axes ``row``, ``col`` (the result drops both)."""
    if ord is None or ord == "fro":
        return b.sqrt(b.sum(b.mul(x, x), axes=tuple(sorted((row, col)))))
    if ord in (2, -2, "nuc"):
        s = b.svdvals(_to_end(b, x, row, col))
        if ord == "nuc":
            return b.sum(s, axes=_last(s))
        return (b.max if ord == 2 else b.min)(s, axes=_last(s))
    if ord in (1, -1, np.inf, -np.inf):
        along, across = (row, col) if ord in (1, -1) else (col, row)
        sums = b.sum(b.abs(x), axes=(along,))
        across -= across > along
        return (b.max if ord in (1, np.inf) else b.min)(sums, axes=(across,))
    raise UnsupportedError(f"np.linalg.norm: matrix norm ord={ord!r} at {where()}")


def _norm_axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)):
        return (normalize_axis(axis, ndim, "np.linalg.norm"),)
    return tuple(normalize_axis(a, ndim, "np.linalg.norm") for a in axis)


@_reg("norm")
def _norm(L: LoweringContext, outs: list[TensorType], x: Any, ord: Any = None,
          axis: Any = None, keepdims: bool = False) -> Value:
    o, b = outs[0], L.b
    v = L.operand(x, o.dtype, None)
    axes = _norm_axes(axis, v.ndim)
    if axes is None:
        if ord is None or v.ndim == 1:
            res = _vector_norm(b, v, ord, tuple(range(v.ndim)))
        else:
            res = _matrix_norm(b, v, ord, 0, 1)
    elif len(axes) == 1:
        res = _vector_norm(b, v, ord, axes)
    else:
        res = _matrix_norm(b, v, ord, *axes)
    return b.reshape_to(res, o.shape)


@_reg("vector_norm")
def _vector_norm_entry(L: LoweringContext, outs: list[TensorType], x: Any, *,
                       axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Value:
    o = outs[0]
    v = L.operand(x, o.dtype, None)
    axes = _norm_axes(axis, v.ndim)
    return L.b.reshape_to(_vector_norm(L.b, v, ord, axes if axes is not None else
                                       tuple(range(v.ndim))), o.shape)


@_reg("matrix_norm")
def _matrix_norm_entry(L: LoweringContext, outs: list[TensorType], x: Any, *,
                       keepdims: bool = False, ord: Any = "fro") -> Value:
    o = outs[0]
    v = L.operand(x, o.dtype, None)
    return L.b.reshape_to(_matrix_norm(L.b, v, ord, v.ndim - 2, v.ndim - 1), o.shape)


@_reg("cond")
def _cond(L: LoweringContext, outs: list[TensorType], x: Any, p: Any = None) -> Value:
    """2-norm condition numbers from the singular values; the others as
    ``norm(x) * norm(inv(x))``, inf for a singular matrix (as NumPy)."""
    o, b = outs[0], L.b
    v = L.operand(x, o.dtype, None)
    if p is None or p in (2, -2):
        s = b.svdvals(v)
        hi, lo = b.max(s, axes=_last(s)), b.min(s, axes=_last(s))
        return b.reshape_to(b.div(hi, lo) if p != -2 else b.div(lo, hi), o.shape)
    row, col = v.ndim - 2, v.ndim - 1
    r = b.mul(_matrix_norm(b, v, p, row, col), _matrix_norm(b, _inv_lu(b, v), p, row, col))
    nan_x = b.max(b.convert_to(b.isnan(v), np.int64), axes=(row, col))
    undefined = b.emit("and", b.isnan(r), b.eq(nan_x, b.const(0, np.int64, nan_x.shape)))
    return b.reshape_to(b.select(undefined, b.const(np.inf, o.dtype, r.shape), r), o.shape)


@_reg("matrix_rank")
def _matrix_rank(L: LoweringContext, outs: list[TensorType], A: Any, tol: Any = None,
                 hermitian: bool = False, *, rtol: Any = None) -> Value:
    """The number of singular values above the tolerance (an integer: no gradient)."""
    o, b = outs[0], L.b
    t = L.type_of(A)
    x = L.operand(A, t.dtype if t is not None and t.dtype.kind == "f" else np.float64, None)
    if x.ndim < 2:
        nz = b.ne(x, b.const(0, x.dtype, x.shape))
        return b.convert_to(b.max(b.convert_to(nz, o.dtype), axes=_last(x, x.ndim)), o.dtype)
    s = b.svdvals(x)
    tol = static_value(L, tol, "np.linalg.matrix_rank's tol", "Yota takes it as a constant")
    rtol = static_value(L, rtol, "np.linalg.matrix_rank's rtol", "Yota takes it as a constant")
    if tol is not None:
        cut = b.const(np.asarray(tol, dtype=s.dtype)[..., None], s.dtype, s.shape)
    else:
        r = max(x.shape[-2:]) * float(np.finfo(s.dtype).eps) if rtol is None else rtol
        smax = b.max(s, axes=_last(s)) if s.shape[-1] else b.const(0.0, s.dtype, s.shape[:-1])
        smax = b.broadcast_to(b.reshape_to(smax, smax.shape + (1,)), s.shape)
        cut = b.mul(smax, b.const(np.asarray(r, dtype=s.dtype)[..., None], s.dtype, s.shape))
    count = b.sum(b.convert_to(b.gt(s, cut), np.int64), axes=_last(s))
    return b.convert_to(b.reshape_to(count, o.shape), o.dtype)


# -- products, powers, tensor solves ---------------------------------------------------------------
def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest parenthesization of a matrix chain (the classic
    dynamic program; matrix i is ``dims[i] x dims[i + 1]``)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


@_reg("multi_dot")
def _multi_dot(L: LoweringContext, outs: list[TensorType], arrays: Any, *,
               out: Any = None) -> Value:
    """A chain of matrix products in the cheapest order (the first and last may be
    vectors: a row and a column)."""
    o, b = outs[0], L.b
    xs = [L.operand(a, o.dtype, None) for a in arrays]
    xs[0] = b.reshape_to(xs[0], (1,) + xs[0].shape) if xs[0].ndim == 1 else xs[0]
    xs[-1] = b.reshape_to(xs[-1], xs[-1].shape + (1,)) if xs[-1].ndim == 1 else xs[-1]
    split = _chain_order([x.shape[0] for x in xs] + [xs[-1].shape[1]])

    def product(i: int, j: int) -> Value:
        if i == j:
            return xs[i]
        k = split[i][j]
        return b.matmul(product(i, k), product(k + 1, j))

    return b.reshape_to(product(0, len(xs) - 1), o.shape)


@_reg("matrix_power")
def _matrix_power(L: LoweringContext, outs: list[TensorType], a: Any, n: Any) -> Value:
    """Repeated squaring of ``a`` (of its inverse for ``n < 0``; ``n = 0``: the identity)."""
    o, b = outs[0], L.b
    k = static_value(L, n, "np.linalg.matrix_power's n", "Yota unrolls the products")
    x = L.operand(a, o.dtype, None)
    if int(k) < 0:
        x = inverse(b, x)
    result: Value | None = None
    square, k = x, abs(int(k))
    while k:
        if k & 1:
            result = square if result is None else matmul_values(L, result, square, o)
        k >>= 1
        if k:
            square = matmul_values(L, square, square, o)
    return result if result is not None else _eye(b, o.dtype, o.shape)


@_reg("tensorinv")
def _tensorinv(L: LoweringContext, outs: list[TensorType], a: Any, ind: int = 2) -> Value:
    o, b = outs[0], L.b
    x = L.operand(a, o.dtype, None)
    rows = int(np.prod(x.shape[:ind]))
    return b.reshape_to(inverse(b, b.reshape_to(x, (rows, x.type.size // max(rows, 1)))),
                        o.shape)


@_reg("tensorsolve")
def _tensorsolve(L: LoweringContext, outs: list[TensorType], a: Any, b: Any,
                 axes: Any = None) -> Value:
    o, bld = outs[0], L.b
    x, y = L.operand(a, o.dtype, None), L.operand(b, o.dtype, None)
    if axes is not None:
        order = [i for i in range(x.ndim) if i not in
                 [normalize_axis(k, x.ndim, "np.linalg.tensorsolve") for k in axes]]
        order += [normalize_axis(k, x.ndim, "np.linalg.tensorsolve") for k in axes]
        x = bld.transpose(x, perm=tuple(order))
    n = y.type.size
    sq = bld.reshape_to(x, (n, x.type.size // max(n, 1)))
    sol = bld.solve(sq, bld.reshape_to(y, (n, 1)))
    return bld.reshape_to(sol, o.shape)
