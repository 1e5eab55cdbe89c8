"""The LAPACK-level ops (``yota.ir.ops.lapack``) as calls into LAPACK: one emitter per op.

Which LAPACK, and how generated code reaches it by name: ``runtime/lapack.py``.

Conventions of the calls (Fortran ABI, as gfortran compiles reference LAPACK): every
argument by reference, integers 64-bit (ILP64), each character argument followed at the
end of the argument list by its hidden length (a ``size_t``, always 1; the routines
OpenBLAS reimplements in C ignore the extras). Workspace sizes are asked of the routine
itself at compile time (``lwork = -1``, as NumPy does) and kept as fixed scratch of the
op (never below LAPACK's documented minimum, so a cached object stays valid with another
build of the library). Batches loop in native code around one call per matrix.

Layouts: LAPACK is column-major. Where NumPy hands LAPACK a column-major copy (cholesky,
solve, eigh, svd, qr), so do we: the operand is copied *transposed* into scratch, the
routine runs there, and its outputs are copied back transposed: the computation
``np.linalg`` makes, eigenvector and singular-vector signs included. The results are
often NumPy's to the last bit, but OpenBLAS's kernels pick their paths by the alignment
of the buffers (ours live in the call's workspace, NumPy's come from malloc), which
reorders sums: where an op is sensitive (singular vectors of close singular values) that
shows, tens of ulps in a small SVD. ``potrf`` on the upper triangle of the row-major
matrix, the same matrix without the copies, was an ulp off NumPy from n = 40 on. Like NumPy, these
compute in float64 for float32 operands too (the copies convert). ``lu`` (``getrf`` on a
column-major copy) and ``triangular_solve``, which NumPy has no function for, run in the
operands' precision; ``triangular_solve`` uses a transposition identity instead of
copies: a row-major ``X`` is a column-major ``X^T``, so ``op(A) X = B`` is ``trsm`` from
the right, ``X^T op(A)^T = B^T``, on the caller's strides when BLAS can read them.

Failures: ``info > 0`` (not positive definite, singular, no convergence; and ``gesdd``'s
-4, a NaN in the matrix) stops the call with a ``"linalg"`` failure record
(``backends/failures.py``), raised as the same ``LinAlgError`` the interpreter raises, at
the user's line. NaNs otherwise go where NumPy's calls put them (``potrf`` takes a NaN
pivot for a number, as in NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import llvmlite.ir as ir
import numpy as np
from yota.ir.core import Op, Value
from yota.ir.errors import YotaError

from ..failures import linalg_record
from ..kernel import Kernel, contiguous_strides
from ..layout import Loc, Storage
from ..lowering import Emitter, KernelArgs
from .layout import blas_matrix
from .loops import linear, loop, nest
from .lower import FnGen
from .runtime.blas import lapack_address
from .runtime.lapack import SIGNATURES, query, symbol
from .types import I8, I64, PTR, VOID, declare, i64, mem_type, reg_type

LAPACK_EMITTERS: dict[str, Emitter] = {}
F64, I8T = np.dtype(np.float64), np.dtype(np.int64)
Arg: TypeAlias = "str | int | float | ir.Value"  # a character, integer, float, pointer


def _emitter(name: str) -> Callable[[Emitter], Emitter]:
    def reg(f: Emitter) -> Emitter:
        LAPACK_EMITTERS[name] = f
        return f
    return reg


# -- calls ------------------------------------------------------------------------------------
def _check_bound(op: Op, routine: str, dt: np.dtype) -> None:
    if not op.operands[0].type.size:
        return
    if lapack_address(symbol(routine, dt)) is None:
        raise YotaError(
            f"np.linalg '{op.name}' (at {op.loc or 'an unknown line'}) needs LAPACK on the "
            "llvm backend, and this NumPy has no bundled OpenBLAS exporting "
            f"scipy_{symbol(routine, dt)[5:]}_64_ (NumPy wheels from PyPI have it); run "
            "it with backend='interp', or install NumPy from a PyPI wheel")


def _call(g: FnGen, routine: str, dt: np.dtype, args: list[Arg]) -> None:
    """Call LAPACK/BLAS ``routine`` of ``dt``'s precision: characters, integers and floats
    are passed by reference (slots in the function's entry block), pointers as they are;
    one hidden length per character at the end."""
    assert len(args) == SIGNATURES[routine][0], routine
    ab = g.ab
    ptrs: list[ir.Value] = []
    nchar = 0
    for a in args:
        if isinstance(a, str):
            p = ab.alloca(I8)
            ab.store(ir.Constant(I8, ord(a)), p)
            nchar += 1
        elif isinstance(a, bool | int):
            p = ab.alloca(I64)
            ab.store(i64(int(a)), p)
        elif isinstance(a, float):
            ft = reg_type(dt)
            p = ab.alloca(ft)
            ab.store(ir.Constant(ft, a), p)
        else:
            p = a
        ptrs.append(p)
    fn = declare(g.mg.module, symbol(routine, dt), VOID, [PTR] * len(ptrs) + [I64] * nchar)
    g.b.call(fn, ptrs + [i64(1)] * nchar)


def _info(g: FnGen) -> ir.Value:
    """A fresh ``info`` slot."""
    return g.ab.alloca(I64)


def _check_info(g: FnGen, op: Op, routine: str, info: ir.Value, positive: bool = True
                ) -> None:
    """Fail the call with ``op``'s linalg record if ``info`` is not 0 (``positive=False``:
    only if it is negative, an argument LAPACK rejected)."""
    v = g.b.load(info, typ=I64)
    bad = (g.b.icmp_signed("!=", v, i64(0)) if positive
           else g.b.icmp_signed("<", v, i64(0)))
    g.fail_if(bad, linalg_record(op, g.op_index, routine), v)


# -- memory -----------------------------------------------------------------------------------
def _scratch(g: FnGen, shape: tuple[int, ...], dtype: np.dtype, column_major: bool = False
             ) -> Loc:
    """Scratch of the current op holding ``shape`` (batch dimensions first, each matrix
    row-major, or column-major with ``column_major``), as a location copies can target."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    off = g.scratch_offset(nbytes)
    g.lay.storages.append(Storage("ws", off, nbytes))
    g.bases.append(g.ab.gep(g.ws, [i64(off)], source_etype=I8))
    st = contiguous_strides(shape)
    if column_major and len(shape) >= 2:
        st = st[:-2] + (1, max(1, shape[-2]))
    return Loc(len(g.bases) - 1, 0, st)


def _at(g: FnGen, loc: Loc, dtype: np.dtype, idx: list[ir.Value], nb: int) -> ir.Value:
    """Pointer to the first element of batch entry ``idx`` of ``loc``."""
    return g.elem_ptr(loc, dtype, linear(g.b, idx, loc.strides[:nb]))


def _copy(g: FnGen, shape: tuple[int, ...], src: Loc, dtype: np.dtype, dst: Loc,
          dst_dtype: np.dtype | None = None) -> None:
    """Copy ``shape`` elements from ``src`` to ``dst``, converted to ``dst_dtype``."""
    to = np.dtype(dst_dtype or dtype)
    if to == dtype:
        if src != dst:
            g.copy(shape, src, dtype, dst)
        return
    if not int(np.prod(shape, dtype=np.int64)):
        return
    args = KernelArgs()
    k = Kernel(tuple(shape), (False,) * len(shape))
    x = k.read(g.access(args, src, dtype))
    k.store(k.op("convert", (x,), to, {"dtype": to}), g.access(args, dst, to))
    g.launch(k, args)


def _in_f64(g: FnGen, v: Value, ct: np.dtype) -> Loc:
    """Where result ``v`` is computed in ``ct``: its own location, or scratch of ``ct``
    (converted into ``v`` by ``_copy`` afterwards)."""
    return g.loc(v) if v.dtype == ct else _scratch(g, v.shape, ct)


def _zero_triangle(g: FnGen, loc: Loc, dtype: np.dtype, idx: list[ir.Value], nb: int,
                   rows: int, cols: int, upper: bool) -> None:
    """Zero the strictly upper (or strictly lower) part of one row-major matrix."""
    b = g.b
    base = _at(g, loc, dtype, idx, nb)
    mt = mem_type(dtype)
    rs, cs = loc.strides[-2], loc.strides[-1]

    def row(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        lo = b.add(i, i64(1)) if upper else i64(0)
        hi: ir.Value = i64(cols) if upper else b.select(
            b.icmp_signed("<", i, i64(cols)), i, i64(cols))

        def col(j: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            off = b.add(b.mul(i, i64(rs)), b.mul(j, i64(cs)))
            b.store(ir.Constant(mt, 0.0), b.gep(base, [off], source_etype=mt))
            return []
        loop(b, lo, hi, 1, [], col, name="tri")
        return []
    loop(b, 0, rows, 1, [], row, name="trirow")


def _identity(g: FnGen, loc: Loc, dtype: np.dtype, idx: list[ir.Value], nb: int, n: int
              ) -> None:
    """One n x n identity matrix at ``loc``'s batch entry ``idx``."""
    b = g.b
    base = _at(g, loc, dtype, idx, nb)
    mt = mem_type(dtype)
    rs, cs = loc.strides[-2], loc.strides[-1]

    def row(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        def col(j: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            v = b.select(b.icmp_signed("==", i, j), ir.Constant(mt, 1.0), ir.Constant(mt, 0.0))
            b.store(v, b.gep(base, [b.add(b.mul(i, i64(rs)), b.mul(j, i64(cs)))],
                             source_etype=mt))
            return []
        loop(b, 0, n, 1, [], col, name="idc")
        return []
    loop(b, 0, n, 1, [], row, name="idr")


def _batch(g: FnGen, v: Value, body: Callable[[list[ir.Value]], None]) -> None:
    """``body(idx)`` once per matrix of ``v`` (nothing for an empty batch)."""
    nest(g.b, v.shape[:-2], body, name="lapack")


# -- the ops ----------------------------------------------------------------------------------
@_emitter("cholesky")
def _cholesky(g: FnGen, op: Op) -> None:
    """``dpotrf`` on the lower triangle of a column-major float64 copy, as
    ``np.linalg.cholesky`` (NaNs spread as there); zeros above the diagonal."""
    a, r = op.operands[0], op.result
    dt, n, nb = r.dtype, r.shape[-1], r.ndim - 2
    _check_bound(op, "potrf", F64)
    if not r.type.size:
        return
    sa = _scratch(g, a.shape, F64, column_major=True)
    _copy(g, a.shape, g.loc(a), dt, sa, F64)
    info = _info(g)

    def one(idx: list[ir.Value]) -> None:
        _call(g, "potrf", F64, ["L", n, _at(g, sa, F64, idx, nb), n, info])
        _check_info(g, op, "potrf", info)
    _batch(g, r, one)
    lr = g.loc(r)
    _copy(g, r.shape, sa, F64, lr, dt)
    _batch(g, r, lambda idx: _zero_triangle(g, lr, dt, idx, nb, n, n, upper=True))


def _blas_readable(g: FnGen, v: Value, loc: Loc) -> tuple[Loc, bool, int]:
    """``v``'s matrices where BLAS can read them: (location, stored transposed, leading
    dimension), copying into scratch when BLAS cannot read them where they are."""
    got = blas_matrix(loc, v.shape)
    if got is not None and all(s >= 0 for s in loc.strides):
        return loc, got[0], got[1]
    dst = _scratch(g, v.shape, v.dtype)
    g.copy(v.shape, loc, v.dtype, dst)
    return dst, False, max(1, v.shape[-1])


@_emitter("triangular_solve")
def _triangular_solve(g: FnGen, op: Op) -> None:
    """``trsm`` from the right on the result (a copy of ``b``): row-major ``X`` read
    column-major is ``X^T``, and ``op(A) X = B`` is ``X^T op(A)^T = B^T``."""
    a, b_ = op.operands
    x = op.result
    dt, n, k, nb = x.dtype, x.shape[-2], x.shape[-1], x.ndim - 2
    _check_bound(op, "trsm", dt)
    if not x.type.size:
        return
    lx = g.loc(x)
    _copy(g, b_.shape, g.loc(b_), dt, lx)
    la, stored_t, lda = _blas_readable(g, a, g.operand_loc(g.op_index, 0, a))
    lower, trans = op.attrs["lower"], op.attrs["transpose"]
    # the column-major matrix at la is A^T (row-major storage) or A (stored transposed)
    uplo = ("L" if lower else "U") if stored_t else ("U" if lower else "L")
    transa = ("N" if trans else "T") if stored_t else ("T" if trans else "N")
    diag = "U" if op.attrs["unit_diagonal"] else "N"

    def one(idx: list[ir.Value]) -> None:
        _call(g, "trsm", dt, ["R", uplo, transa, diag, k, n, 1.0, _at(g, la, dt, idx, nb),
                              lda, _at(g, lx, dt, idx, nb), k])
    _batch(g, x, one)


@_emitter("solve")
def _solve(g: FnGen, op: Op) -> None:
    """``dgesv`` on column-major float64 copies of ``a`` and ``b``, as
    ``np.linalg.solve``."""
    a, b_ = op.operands
    x = op.result
    dt, n, k, nb = x.dtype, x.shape[-2], x.shape[-1], x.ndim - 2
    _check_bound(op, "gesv", F64)
    if not x.type.size:
        return
    sa = _scratch(g, a.shape, F64, column_major=True)
    sb = _scratch(g, b_.shape, F64, column_major=True)
    ipiv = _scratch(g, (n,), I8T)
    _copy(g, a.shape, g.loc(a), dt, sa, F64)
    _copy(g, b_.shape, g.loc(b_), dt, sb, F64)
    info = _info(g)

    def one(idx: list[ir.Value]) -> None:
        _call(g, "gesv", F64, [n, k, _at(g, sa, F64, idx, nb), n, g.elem_ptr(ipiv, I8T),
                               _at(g, sb, F64, idx, nb), n, info])
        _check_info(g, op, "gesv", info)
    _batch(g, x, one)
    _copy(g, x.shape, sb, F64, g.loc(x), dt)


@_emitter("lu")
def _lu(g: FnGen, op: Op) -> None:
    """``getrf`` on a column-major copy; its row interchanges (``ipiv``) replayed on
    ``0..n-1`` give ``perm``. A singular matrix is no failure (U has a zero pivot)."""
    a = op.operands[0]
    r, perm = op.results
    dt, n, nb = a.dtype, a.shape[-1], a.ndim - 2
    _check_bound(op, "getrf", dt)
    if not a.type.size:
        return
    i8 = I8T
    sa = _scratch(g, a.shape, dt, column_major=True)
    ipiv = _scratch(g, (n,), i8)
    g.copy(a.shape, g.loc(a), dt, sa)
    info = _info(g)
    lp = g.loc(perm)

    def one(idx: list[ir.Value]) -> None:
        _call(g, "getrf", dt, [n, n, _at(g, sa, dt, idx, nb), n, g.elem_ptr(ipiv, i8), info])
        _check_info(g, op, "getrf", info, positive=False)
        _ipiv_to_perm(g, g.elem_ptr(ipiv, i8), g.elem_ptr(lp, i8, linear(g.b, idx,
                                                                        lp.strides[:nb])),
                      n, lp.strides[-1])
    _batch(g, a, one)
    g.copy(r.shape, sa, dt, g.loc(r))


def _ipiv_to_perm(g: FnGen, ipiv: ir.Value, perm: ir.Value, n: int, stride: int) -> None:
    """perm = 0..n-1, then swap perm[i] and perm[ipiv[i] - 1] for i = 0..n-1."""
    b = g.b

    def at(i: ir.Value) -> ir.Value:
        return b.gep(perm, [b.mul(i, i64(stride))], source_etype=I64)

    def init(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        b.store(i, at(i))
        return []

    def swap(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        j = b.sub(b.load(b.gep(ipiv, [i], source_etype=I64), typ=I64), i64(1))
        pi, pj = b.load(at(i), typ=I64), b.load(at(j), typ=I64)
        b.store(pj, at(i))
        b.store(pi, at(j))
        return []
    loop(b, 0, n, 1, [], init, name="perm0")
    loop(b, 0, n, 1, [], swap, name="perm")


@_emitter("pivots")
def _pivots(g: FnGen, op: Op) -> None:
    """Row interchanges of a permutation (``ir/ops/lapack.py``), per batch entry: ``cur``
    the arrangement so far, ``pos`` where each element is in it (scratch)."""
    p, r = op.operands[0], op.result
    n, nb, i8 = p.shape[-1], p.ndim - 1, I8T
    if not p.type.size:
        return
    cur, pos = _scratch(g, (n,), i8), _scratch(g, (n,), i8)
    lp, lr, b = g.loc(p), g.loc(r), g.b

    def one(idx: list[ir.Value]) -> None:
        src = g.elem_ptr(lp, i8, linear(b, idx, lp.strides[:nb]))
        dst = g.elem_ptr(lr, i8, linear(b, idx, lr.strides[:nb]))
        c, q = g.elem_ptr(cur, i8), g.elem_ptr(pos, i8)
        at = lambda base, i, st=1: b.gep(base, [b.mul(i, i64(st))], source_etype=I64)  # noqa: E731

        def init(k: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            b.store(k, at(c, k))
            b.store(k, at(q, k))
            return []

        def step(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            j = b.load(at(q, b.load(at(src, i, lp.strides[-1]), typ=I64)), typ=I64)
            b.store(j, at(dst, i, lr.strides[-1]))
            x, y = b.load(at(c, i), typ=I64), b.load(at(c, j), typ=I64)
            b.store(y, at(c, i))
            b.store(x, at(c, j))
            b.store(i, at(q, y))
            b.store(j, at(q, x))
            return []
        loop(b, 0, n, 1, [], init, name="piv0")
        loop(b, 0, n, 1, [], step, name="piv")
    nest(b, p.shape[:-1], one, name="pivb")


@_emitter("eigh")
def _eigh(g: FnGen, op: Op) -> None:
    """``dsyevd`` (eigenvectors too) on a column-major float64 copy, as
    ``np.linalg.eigh``."""
    a = op.operands[0]
    w, v = op.results
    dt, n, nb = a.dtype, a.shape[-1], a.ndim - 2
    _check_bound(op, "syevd", F64)
    if not a.type.size:
        return
    uplo = "L" if op.attrs["lower"] else "U"
    lwork, liwork = query("syevd", F64, ["V", uplo, n, None, n, None, None, -1, None, -1,
                                         None], (6, 8))
    lwork, liwork = max(lwork, 1 + 6 * n + 2 * n * n), max(liwork, 3 + 5 * n)
    sa = _scratch(g, a.shape, F64, column_major=True)
    work = _scratch(g, (lwork,), F64)
    iwork = _scratch(g, (liwork,), I8T)
    lw = _in_f64(g, w, F64)
    _copy(g, a.shape, g.loc(a), dt, sa, F64)
    info = _info(g)

    def one(idx: list[ir.Value]) -> None:
        _call(g, "syevd", F64, ["V", uplo, n, _at(g, sa, F64, idx, nb), n,
                                _at1(g, lw, F64, idx, nb), g.elem_ptr(work, F64), lwork,
                                g.elem_ptr(iwork, I8T), liwork, info])
        _check_info(g, op, "syevd", info)
    _batch(g, a, one)
    _copy(g, w.shape, lw, F64, g.loc(w), dt)
    _copy(g, v.shape, sa, F64, g.loc(v), dt)


def _gesdd_work(jobz: str, m: int, n: int, ldu: int, ldvt: int) -> int:
    mn, mx = min(m, n), max(m, n)
    (q,) = query("gesdd", F64, [jobz, m, n, None, max(1, m), None, None, ldu, None, ldvt,
                                None, -1, None, None], (10,))
    least = 3 * mn + max(mx, 7 * mn) if jobz == "N" else 4 * mn * mn + 6 * mn + mx
    return max(q, least, 1)


def _gesdd(g: FnGen, op: Op, jobz: str, s: Value, outs: list[tuple[Loc, int]]) -> None:
    """``dgesdd`` on a column-major float64 copy of ``op``'s operand; singular values
    into ``s``, the column-major factors into ``outs``' scratch (``(scratch, ld)``)."""
    a = op.operands[0]
    dt, (m, n), nb = a.dtype, a.shape[-2:], a.ndim - 2
    ldu = outs[0][1] if outs else 1
    ldvt = outs[1][1] if outs else 1
    lwork = _gesdd_work(jobz, m, n, ldu, ldvt)
    sa = _scratch(g, a.shape, F64, column_major=True)
    work = _scratch(g, (lwork,), F64)
    iwork = _scratch(g, (8 * min(m, n),), I8T)
    ls = _in_f64(g, s, F64)
    _copy(g, a.shape, g.loc(a), dt, sa, F64)
    info = _info(g)
    none = ir.Constant(PTR, None)

    def one(idx: list[ir.Value]) -> None:
        pu = _at(g, outs[0][0], F64, idx, nb) if outs else none
        pvt = _at(g, outs[1][0], F64, idx, nb) if outs else none
        _call(g, "gesdd", F64, [jobz, m, n, _at(g, sa, F64, idx, nb), max(1, m),
                                _at1(g, ls, F64, idx, nb), pu, ldu, pvt, ldvt,
                                g.elem_ptr(work, F64), lwork, g.elem_ptr(iwork, I8T), info])
        _check_info(g, op, "gesdd", info)
    _batch(g, a, one)
    _copy(g, s.shape, ls, F64, g.loc(s), dt)


@_emitter("svd")
def _svd(g: FnGen, op: Op) -> None:
    """``dgesdd`` (``jobz`` 'A' or 'S') as ``np.linalg.svd``; U and V^T come back
    column-major and are copied out transposed. No singular values (an empty matrix):
    identities for the full factors, as NumPy."""
    a = op.operands[0]
    u, s, vt = op.results
    dt, (m, n) = a.dtype, a.shape[-2:]
    _check_bound(op, "gesdd", F64)
    if min(m, n) == 0:
        for f in (u, vt):
            if f.type.size:
                _identities(g, f)
        return
    su = _scratch(g, u.shape, F64, column_major=True)
    svt = _scratch(g, vt.shape, F64, column_major=True)
    jobz = "A" if op.attrs["full_matrices"] else "S"
    _gesdd(g, op, jobz, s, [(su, m), (svt, vt.shape[-2])])
    _copy(g, u.shape, su, F64, g.loc(u), dt)
    _copy(g, vt.shape, svt, F64, g.loc(vt), dt)


def _identities(g: FnGen, f: Value) -> None:
    """An identity matrix in every matrix of ``f``."""
    def one(idx: list[ir.Value]) -> None:
        _identity(g, g.loc(f), f.dtype, idx, f.ndim - 2, f.shape[-1])
    _batch(g, f, one)


@_emitter("svdvals")
def _svdvals(g: FnGen, op: Op) -> None:
    """``dgesdd`` with ``jobz = 'N'``, as ``np.linalg.svd(compute_uv=False)``."""
    a = op.operands[0]
    _check_bound(op, "gesdd", F64)
    if min(a.shape[-2:]) == 0 or not a.type.size:
        return
    _gesdd(g, op, "N", op.result, [])


@_emitter("qr")
def _qr(g: FnGen, op: Op) -> None:
    """``dgeqrf`` then ``dorgqr`` on a column-major float64 copy, as ``np.linalg.qr``: R
    is the upper triangle of the first k rows after ``geqrf``, Q the first k columns
    after ``orgqr``."""
    a = op.operands[0]
    q, r = op.results
    dt, (m, n), nb = a.dtype, a.shape[-2:], a.ndim - 2
    k = min(m, n)
    _check_bound(op, "geqrf", F64)
    if k == 0 or not a.type.size:
        return
    (lw1,) = query("geqrf", F64, [m, n, None, m, None, None, -1, None], (5,))
    (lw2,) = query("orgqr", F64, [m, k, k, None, m, None, None, -1, None], (6,))
    lwork = max(lw1, lw2, n, 1)
    sa = _scratch(g, a.shape, F64, column_major=True)
    tau = _scratch(g, a.shape[:-2] + (k,), F64)
    work = _scratch(g, (lwork,), F64)
    _copy(g, a.shape, g.loc(a), dt, sa, F64)
    info = _info(g)
    lr = g.loc(r)

    def factor(idx: list[ir.Value]) -> None:
        _call(g, "geqrf", F64, [m, n, _at(g, sa, F64, idx, nb), m, _at1(g, tau, F64, idx, nb),
                                g.elem_ptr(work, F64), lwork, info])
        _check_info(g, op, "geqrf", info, positive=False)
    _batch(g, a, factor)
    _copy(g, r.shape, sa, F64, lr, dt)
    _batch(g, r, lambda idx: _zero_triangle(g, lr, dt, idx, nb, k, n, upper=False))

    def form_q(idx: list[ir.Value]) -> None:
        _call(g, "orgqr", F64, [m, k, k, _at(g, sa, F64, idx, nb), m,
                                _at1(g, tau, F64, idx, nb), g.elem_ptr(work, F64), lwork,
                                info])
        _check_info(g, op, "orgqr", info, positive=False)
    _batch(g, a, form_q)
    _copy(g, q.shape, sa, F64, g.loc(q), dt)


def _at1(g: FnGen, loc: Loc, dtype: np.dtype, idx: list[ir.Value], nb: int) -> ir.Value:
    """Pointer to batch entry ``idx`` of a batch of vectors."""
    return g.elem_ptr(loc, dtype, linear(g.b, idx, loc.strides[:nb]))
