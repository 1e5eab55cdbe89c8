"""``scipy.linalg``: solves, factorizations, inverses, determinants, ``expm`` and
``block_diag``, on the LAPACK-level IR ops (``yota.ir.ops.lapack``), with SciPy's
signatures and defaults (``cholesky`` and ``cho_factor`` default to the *upper* factor).

Imported only once the user's code has imported ``scipy.linalg`` (``hooks.FAMILIES``).
Each function is an entry of the NumPy table named ``scipy.linalg.<name>`` whose example
value is SciPy's own result (so SciPy's errors, dtypes and shapes, batches included, are
what a trace sees) and whose lowering computes the same thing:

======================= =================================================================
``solve_triangular``    the ``triangular_solve`` op (``trans`` 1/2/'T'/'C': transposed)
``cholesky``            ``cholesky`` (``lower=False``: of the transpose, transposed)
``cho_factor``          the factor in the triangle it names; the other triangle is ``a``'s,
                        as LAPACK leaves it; returns ``(c, lower)``
``cho_solve``           two ``triangular_solve`` with the triangle ``lower`` names
``lu_factor``           ``lu`` and ``pivots`` (LAPACK's 0-based row interchanges, int32)
``lu_solve``            ``lu``'s permutation (of the same trace; or a constant ``piv``) and
                        two ``triangular_solve`` (``trans``: of the transpose)
``solve``               ``assume_a``: ``None``/'gen' the ``solve`` op, 'pos' Cholesky of the
                        named triangle, 'sym'/'her' the named triangle mirrored, 'diagonal',
                        'upper triangular'/'lower triangular', 'tridiagonal' (the band),
                        'banded' (the general solve); ``transposed``; a 1x1 ``a`` divides
``inv``                 ``solve`` against the identity (``assume_a``, ``lower`` as there)
``det``                 ``lu``: the product of U's diagonal and the permutation's sign
``eigh``                ``eigh`` (``lower``, ``eigvals_only``, ``subset_by_index``); with
                        ``b``: Cholesky of ``b`` and the standard problem (``type`` 1, 2, 3)
``svd``                 ``svd`` / ``svdvals`` (either ``lapack_driver``)
``expm``                Padé 13 with scaling and squaring, as traced NumPy (differentiable
                        to any order); the number of squarings ``s`` is chosen from the
                        example's 1-norm and guarded (a norm outside ``θ13·2^(s-1),
                        θ13·2^s]`` retraces)
``block_diag``          zero padding and concatenation
======================= =================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg as sl

from yota.ir.core import Builder, Value
from yota.ir.errors import LinAlgError, UnsupportedError
from yota.ir.ops import iota
from yota.ir.types import TensorType

from ..userloc import where
from .hooks import TraceAPI, hook, library_call
from .linalg import _batched, _diag, _lu_parts, _swap, solve_values
from .registry import LoweringContext, register
from .static import static_value

# -- the table entries ----------------------------------------------------------------------------


def _checked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """SciPy's ``fn`` on the example values; its ``LinAlgError`` becomes Yota's, naming
    the function and the user's line."""
    run = library_call(fn)

    def forward(*args: Any, **kwargs: Any) -> Any:
        try:
            return run(*args, **kwargs)
        except np.linalg.LinAlgError as e:
            if isinstance(e, LinAlgError):
                raise
            raise LinAlgError(f"{e} (scipy.linalg.{name} at {where()})") from None
    forward.__name__ = name
    return forward


def _entry(name: str, forward: Callable[..., Any] | None = None) -> Callable[[Any], Any]:
    """Register the decorated lowering as entry ``scipy.linalg.<name>`` and the function
    ``scipy.linalg.<name>`` as passing its call on to it (``hook``)."""
    def deco(lower: Any) -> Any:
        key = f"scipy.linalg.{name}"
        register(key, _checked(name, forward or getattr(sl, name)))(lower)
        if forward is None:
            hook("scipy.linalg", name)(lambda api, *a, **k: api.call(key, *a, **k))
        return lower
    return deco


def _static(L: LoweringContext, a: Any, what: str) -> Any:
    return static_value(L, a, f"scipy.linalg's {what}", "Yota compiles one case of it")


# -- helpers --------------------------------------------------------------------------------------
def _rhs(b: Builder, y: Value) -> tuple[Value, bool]:
    """A right-hand side as ``[..., n, k]``; whether it was a vector ``[..., n]``."""
    return (b.reshape_to(y, y.shape + (1,)), True) if y.ndim == 1 else (y, False)


def _tsolve(b: Builder, a: Value, y: Value, lower: bool, transpose: bool,
            unit: bool = False) -> Value:
    a, y = _batched(b, a, y)
    return b.triangular_solve(a, y, lower=lower, transpose=transpose, unit_diagonal=unit)


def _triangle(b: Builder, x: Value, lower: bool, k: int = 0) -> Value:
    """``tril(x, k)`` (``lower``) or ``triu(x, k)``."""
    return b.mul(x, iota.tri(b, x.shape, k, x.dtype, upper=not lower))


def _mirrored(b: Builder, x: Value, lower: bool) -> Value:
    """The symmetric matrix the triangle ``lower`` names stands for."""
    return b.add(_triangle(b, x, lower), _swap(b, _triangle(b, x, lower, -1 if lower else 1)))


def _transposed(trans: Any) -> bool:
    if trans in (0, "N", "n"):
        return False
    if trans in (1, 2, "T", "C", "t", "c"):
        return True
    raise UnsupportedError(f"scipy.linalg: trans={trans!r} at {where()}")


# -- triangular and Cholesky solves -----------------------------------------------------------------
@_entry("solve_triangular")
def _solve_triangular(L: LoweringContext, outs: list[TensorType], a: Any, b: Any,
                      trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                      overwrite_b: bool = False, check_finite: bool = True) -> Value:
    o, bld = outs[0], L.b
    x = L.operand(a, o.dtype, None)
    y, _ = _rhs(bld, L.operand(b, o.dtype, None))
    r = _tsolve(bld, x, y, bool(_static(L, lower, "lower")),
                _transposed(_static(L, trans, "trans")), bool(_static(L, unit_diagonal,
                                                                      "unit_diagonal")))
    return bld.reshape_to(r, o.shape)


def _factor(b: Builder, x: Value, lower: bool) -> Value:
    """The Cholesky factor of the triangle ``lower`` names (L, or U = Lᵀ of the upper)."""
    return b.cholesky(x) if lower else _swap(b, b.cholesky(_swap(b, x)))


@_entry("cholesky")
def _cholesky(L: LoweringContext, outs: list[TensorType], a: Any, lower: bool = False,
              overwrite_a: bool = False, check_finite: bool = True) -> Value:
    return _factor(L.b, L.operand(a, outs[0].dtype, None), bool(_static(L, lower, "lower")))


def _cho_factor_c(a: Any, lower: bool = False, overwrite_a: bool = False,
                  check_finite: bool = True) -> Any:
    return sl.cho_factor(a, lower, overwrite_a, check_finite)[0]


@_entry("cho_factor", _cho_factor_c)
def _cho_factor(L: LoweringContext, outs: list[TensorType], a: Any, lower: bool = False,
                overwrite_a: bool = False, check_finite: bool = True) -> Value:
    """The factor in its triangle, ``a``'s entries in the other (what LAPACK leaves)."""
    b, low = L.b, bool(_static(L, lower, "lower"))
    x = L.operand(a, outs[0].dtype, None)
    return b.add(_factor(b, x, low), _triangle(b, x, not low, 1 if low else -1))


@hook("scipy.linalg", "cho_factor")
def _cho_factor_version(api: TraceAPI, a: Any, lower: bool = False, overwrite_a: bool = False,
                        check_finite: bool = True) -> tuple[Any, bool]:
    return api.call("scipy.linalg.cho_factor", a, lower=lower,
                    check_finite=check_finite), bool(lower)


def _cho_solve_fwd(c: Any, b: Any, lower: bool = False, overwrite_b: bool = False,
                   check_finite: bool = True) -> Any:
    return sl.cho_solve((c, lower), b, overwrite_b, check_finite)


@_entry("cho_solve", _cho_solve_fwd)
def _cho_solve(L: LoweringContext, outs: list[TensorType], c: Any, b: Any, lower: bool = False,
               overwrite_b: bool = False, check_finite: bool = True) -> Value:
    o, bld, low = outs[0], L.b, bool(_static(L, lower, "lower"))
    f = L.operand(c, o.dtype, None)
    y, _ = _rhs(bld, L.operand(b, o.dtype, None))
    z = _tsolve(bld, f, y, low, not low)  # L z = b, or Uᵀ z = b
    return bld.reshape_to(_tsolve(bld, f, z, low, low), o.shape)


@hook("scipy.linalg", "cho_solve")
def _cho_solve_version(api: TraceAPI, c_and_lower: Any, b: Any, overwrite_b: bool = False,
                       check_finite: bool = True) -> Any:
    c, lower = c_and_lower
    return api.call("scipy.linalg.cho_solve", c, b, lower=bool(lower),
                    check_finite=check_finite)


# -- LU ---------------------------------------------------------------------------------------------
@_entry("lu_factor")
def _lu_factor(L: LoweringContext, outs: list[TensorType], a: Any, overwrite_a: bool = False,
               check_finite: bool = True) -> list[Value]:
    b = L.b
    f, perm = b.lu(L.operand(a, outs[0].dtype, None))
    return [f, b.convert_to(b.pivots(perm), outs[1].dtype)]


def _permutation(L: LoweringContext, piv: Any, n: int) -> Value:
    """The permutation ``lu`` computed with pivots ``piv`` (``lu_factor``'s, in this
    trace), or the one a constant ``piv`` describes."""
    b = L.b
    if L.is_traced(piv):
        v = L.operand(piv, None, None)
        made = {r: op for op in b.ops for r in op.results}
        op = made.get(v)
        while op is not None and op.name == "convert":
            op = made.get(op.operands[0])
        if op is not None and op.name == "pivots":
            return op.operands[0]
        if not any(o.name == "const" and o.results[0] is v for o in b.ops):
            raise UnsupportedError(
                f"scipy.linalg.lu_solve at {where()}: the pivots are computed from the "
                "function's inputs but not by scipy.linalg.lu_factor in it; pass the "
                "(lu, piv) that lu_factor returns in the same function")
    piv = np.asarray(static_value(L, piv, "lu_solve's piv"))
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), piv.shape).copy()
    for i in range(n):
        j = piv[..., i]
        pi = perm[..., i].copy()
        perm[..., i] = np.take_along_axis(perm, j[..., None], -1)[..., 0]
        np.put_along_axis(perm, j[..., None], pi[..., None], -1)
    return b.const(perm, np.int64)


def _lu_solve_fwd(lu: Any, piv: Any, b: Any, trans: Any = 0, overwrite_b: bool = False,
                  check_finite: bool = True) -> Any:
    return sl.lu_solve((lu, piv), b, trans, overwrite_b, check_finite)


@_entry("lu_solve", _lu_solve_fwd)
def _lu_solve(L: LoweringContext, outs: list[TensorType], lu: Any, piv: Any, b: Any,
              trans: Any = 0, overwrite_b: bool = False, check_finite: bool = True) -> Value:
    """``a[perm] = L U``: ``x = U⁻¹ L⁻¹ b[perm]``; transposed, ``x[perm] = L⁻ᵀ U⁻ᵀ b``."""
    o, bld = outs[0], L.b
    f = L.operand(lu, o.dtype, None)
    y, _ = _rhs(bld, L.operand(b, o.dtype, None))
    n = f.shape[-1]
    perm = _permutation(L, piv, n)
    full = perm.shape + (n,)
    cols = iota.arange(bld, full, -1, np.int64)
    pm = bld.convert_to(bld.eq(bld.broadcast_to(bld.reshape_to(perm, perm.shape + (1,)), full),
                               cols), o.dtype)  # pm @ v = v[perm]
    if _transposed(_static(L, trans, "trans")):
        z = _tsolve(bld, f, _tsolve(bld, f, y, False, True), True, True, True)
        x = bld.matmul(*_batched(bld, _swap(bld, pm), z))
    else:
        z = _tsolve(bld, f, bld.matmul(*_batched(bld, pm, y)), True, False, True)
        x = _tsolve(bld, f, z, False, False)
    return bld.reshape_to(x, o.shape)


@hook("scipy.linalg", "lu_solve")
def _lu_solve_version(api: TraceAPI, lu_and_piv: Any, b: Any, trans: Any = 0,
                      overwrite_b: bool = False, check_finite: bool = True) -> Any:
    lu, piv = lu_and_piv
    return api.call("scipy.linalg.lu_solve", lu, piv, b, trans=trans,
                    check_finite=check_finite)


# -- solve, inv, det --------------------------------------------------------------------------------
_STRUCTURES = {None: "gen", "general": "gen", "gen": "gen", "diagonal": "diagonal",
               "tridiagonal": "tridiagonal", "banded": "gen", "upper triangular": "upper",
               "lower triangular": "lower", "pos": "pos", "positive definite": "pos",
               "sym": "sym", "symmetric": "sym", "her": "sym", "hermitian": "sym"}


def _structured_solve(b: Builder, x: Value, y: Value, kind: str, lower: bool,
                      transposed: bool) -> Value:
    """``op(x)⁻¹ y`` for ``x [..., n, n]``, ``y [..., n, k]`` by ``kind`` (``_STRUCTURES``)."""
    if kind in ("upper", "lower"):
        return _tsolve(b, x, y, kind == "lower", transposed)
    if kind == "pos":
        f = _factor(b, x, True) if lower else _swap(b, _factor(b, x, False))
        return _tsolve(b, f, _tsolve(b, f, y, True, False), True, True)
    if kind == "sym":
        return solve_values(b, _mirrored(b, x, lower), y)
    if kind == "diagonal":
        d = _diag(b, x)
        d, y = _batched(b, b.reshape_to(d, d.shape + (1,)), y)
        return b.div(y, b.broadcast_to(d, y.shape))
    if kind == "tridiagonal":
        x = b.mul(x, b.mul(iota.tri(b, x.shape, 1, x.dtype), iota.tri(b, x.shape, -1, x.dtype,
                                                                       upper=True)))
    return solve_values(b, _swap(b, x) if transposed else x, y)


def _kind(assume_a: Any) -> str:
    kind = _STRUCTURES.get(assume_a)
    if kind is None:
        raise UnsupportedError(f"scipy.linalg: assume_a={assume_a!r} at {where()}")
    return kind


@_entry("solve")
def _solve(L: LoweringContext, outs: list[TensorType], a: Any, b: Any, lower: bool = False,
           overwrite_a: bool = False, overwrite_b: bool = False, check_finite: bool = True,
           assume_a: Any = None, transposed: bool = False) -> Value:
    o, bld = outs[0], L.b
    x = L.operand(a, o.dtype, None)
    x = bld.reshape_to(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
    y, _ = _rhs(bld, L.operand(b, o.dtype, None))
    if o.size == 0:
        return bld.const(0.0, o.dtype, o.shape)
    if x.shape[-2:] == (1, 1):  # SciPy divides (any b)
        x, y = _batched(bld, x, y)
        return bld.reshape_to(bld.div(y, bld.broadcast_to(x, y.shape)), o.shape)
    r = _structured_solve(bld, x, y, _kind(_static(L, assume_a, "assume_a")),
                          bool(_static(L, lower, "lower")),
                          bool(_static(L, transposed, "transposed")))
    return bld.reshape_to(r, o.shape)


@_entry("inv")
def _inv(L: LoweringContext, outs: list[TensorType], a: Any, overwrite_a: bool = False,
         check_finite: bool = True, *, assume_a: Any = None, lower: bool = False) -> Value:
    o, bld = outs[0], L.b
    x = L.operand(a, o.dtype, None)
    if o.size == 0:
        return bld.const(0.0, o.dtype, o.shape)
    eye = iota.eye(bld, x.shape, 0, o.dtype)
    return _structured_solve(bld, x, eye, _kind(_static(L, assume_a, "assume_a")),
                             bool(_static(L, lower, "lower")), False)


@_entry("det")
def _det(L: LoweringContext, outs: list[TensorType], a: Any, overwrite_a: bool = False,
         check_finite: bool = True) -> Value:
    o = outs[0]
    d, sign = _lu_parts(L, a, o)
    return L.b.reshape_to(L.b.mul(sign, L.b.prod(d, axes=(d.ndim - 1,))), o.shape)


# -- eigh, svd ------------------------------------------------------------------------------------
def _standard_form(b: Builder, x: Value, y: Value, lower: bool, kind: int
                   ) -> tuple[Value, Callable[[Value], Value]]:
    """The generalized problem of ``type`` ``kind`` as a standard one: ``C`` and the map
    from its eigenvectors to the problem's (``y = L Lᵀ``, triangles as ``lower`` names)."""
    f = _factor(b, y, True) if lower else _swap(b, _factor(b, y, False))
    a = _mirrored(b, x, lower)
    if kind == 1:  # C = L⁻¹ A L⁻ᵀ
        c = _swap(b, _tsolve(b, f, _swap(b, _tsolve(b, f, a, True, False)), True, False))
    else:  # C = Lᵀ A L
        c = b.matmul(b.matmul(_swap(b, f), a), f)
    if kind == 3:
        return c, lambda v: b.matmul(f, v)
    return c, lambda v: _tsolve(b, f, v, True, True)


@_entry("eigh")
def _eigh(L: LoweringContext, outs: list[TensorType], a: Any, b: Any = None, *,
          lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, type: int = 1, check_finite: bool = True,
          subset_by_index: Any = None, subset_by_value: Any = None,
          driver: Any = None) -> Any:
    bld, dt = L.b, outs[0].dtype
    if _static(L, subset_by_value, "subset_by_value") is not None:
        raise UnsupportedError(f"scipy.linalg.eigh(..., subset_by_value=...) at {where()}: "
                               "how many eigenvalues it keeps depends on the values; use "
                               "subset_by_index, or select from all of them")
    low = bool(_static(L, lower, "lower"))
    x = L.operand(a, dt, None)
    if b is None:
        w, v = bld.eigh(x, lower=low)
    else:
        c, back = _standard_form(bld, x, L.operand(b, dt, None), low,
                                 int(_static(L, type, "type")))
        w, v = bld.eigh(c, lower=True)
        v = back(v)
    sub = _static(L, subset_by_index, "subset_by_index")
    if sub is not None:
        lo, hi = (int(i) for i in sub)
        w = bld.slice(w, start=(0,) * (w.ndim - 1) + (lo,), stop=w.shape[:-1] + (hi + 1,),
                      step=(1,) * w.ndim)
        v = bld.slice(v, start=(0,) * (v.ndim - 1) + (lo,), stop=v.shape[:-1] + (hi + 1,),
                      step=(1,) * v.ndim)
    return w if eigvals_only else [w, v]


@_entry("svd")
def _svd(L: LoweringContext, outs: list[TensorType], a: Any, full_matrices: bool = True,
         compute_uv: bool = True, overwrite_a: bool = False, check_finite: bool = True,
         lapack_driver: str = "gesdd") -> Any:
    x = L.operand(a, outs[0].dtype, None)
    if not compute_uv:
        return L.b.svdvals(x)
    u, s, vt = L.b.svd(x, full_matrices=bool(_static(L, full_matrices, "full_matrices")))
    return [u, s, vt]


# -- block_diag -------------------------------------------------------------------------------------
@_entry("block_diag")
def _block_diag(L: LoweringContext, outs: list[TensorType], *arrs: Any) -> Value:
    """Each block (as ``np.atleast_2d``) zero-padded to the full width; rows stacked."""
    o, b = outs[0], L.b
    width = o.shape[1]
    rows, col = [], 0
    for a in arrs:
        x = L.operand(a, o.dtype, None)
        x = b.reshape_to(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
        r, c = x.shape
        if r:
            rows.append(b.pad(x, low=(0, col), high=(0, width - col - c), interior=(0, 0)))
        col += c
    if not rows or o.size == 0:
        return b.const(0.0, o.dtype, o.shape)
    return rows[0] if len(rows) == 1 else b.concatenate(*rows, axis=0)


# -- expm: Padé 13 with scaling and squaring, as traced NumPy --------------------------------------
_THETA13 = 5.371920351148152
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


def _squarings(api: TraceAPI, norm: Any) -> int:
    """Squarings for the example's 1-norm; guards that a new input's norm needs as many."""
    value = float(np.asarray(api.value(norm)))
    s = max(0, math.ceil(math.log2(value / _THETA13))) if math.isfinite(value) and value else 0
    bool(norm <= _THETA13 * 2.0 ** s)  # guarded: each traced comparison is checked per call
    if s:
        bool(norm > _THETA13 * 2.0 ** (s - 1))
    return s


def _pade13(a: Any, eye: Any) -> Any:
    c = _PADE13
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (c[13] * a6 + c[11] * a4 + c[9] * a2) + c[7] * a6 + c[5] * a4
             + c[3] * a2 + c[1] * eye)
    v = a6 @ (c[12] * a6 + c[10] * a4 + c[8] * a2) + c[6] * a6 + c[4] * a4 + c[2] * a2 \
        + c[0] * eye
    return np.linalg.solve(v - u, v + u)


@hook("scipy.linalg", "expm")
def _expm(api: TraceAPI, A: Any) -> Any:
    a = A
    dt = np.asarray(api.value(a)).dtype
    if dt.kind not in "f":
        a = a * 1.0  # SciPy computes integers in float64
    shape = np.shape(api.value(a))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return sl.expm(api.value(a))  # SciPy's error for a non-square input
    n = shape[-1]
    if n == 0:
        return a * 1.0
    if n == 1:
        return np.exp(a)
    norm = np.max(np.sum(np.abs(a), axis=-2))
    s = _squarings(api, norm)
    r = _pade13(a * (0.5 ** s) if s else a, np.eye(n, dtype=a.dtype))
    for _ in range(s):
        r = r @ r
    return r
