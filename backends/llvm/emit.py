"""The op -> emitter table of the llvm backend: the shared emitters
(``backends/emit.py``) plus the ones that render LLVM IR directly (GEMM calls, matrix
products as loops, indexing, arg-reductions, guards, calls) or differ here (pad,
concatenate). Each renders one op from the locations the layout chose (``g.loc``);
none of them analyses the program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import numpy as np
from yota.ir.core import Op, Value

from ..emit import new_table
from ..failures import guard_record, index_record
from ..kernel import Kernel, fill_kernel
from ..layout import Loc
from ..lowering import KernelArgs
from .abi import GEMM_TILES, TILE_EXTRA
from .callback import CALLBACK_EMITTERS
from .lapack import LAPACK_EMITTERS
from .layout import blas_matrix
from .loops import linear, loop, nest
from .lower import FnGen
from .types import F32, F64, I1, I32, I64, PTR, declare, i64, mem_type, reg_type

EMITTERS, emitter = new_table()
EMITTERS.update(LAPACK_EMITTERS)  # cholesky, solve, eigh, svd, qr...: calls into LAPACK
EMITTERS.update(CALLBACK_EMITTERS)  # callback: a call out to Python (opaque primitives)


@emitter("concatenate")
def _concatenate(g: FnGen, op: Op) -> None:
    r, axis = op.result, op.attrs["axis"]
    out = g.loc(r)
    start = 0
    for v in op.operands:
        dst = Loc(out.storage, out.offset + start * out.strides[axis], out.strides)
        g.copy(v.shape, g.loc(v), v.dtype, dst)
        start += v.shape[axis]


@emitter("pad")
def _pad(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    out = g.loc(r)
    if r.type.size:
        args = KernelArgs()
        k = fill_kernel(r.shape, g.access(args, out, r.dtype), 0)
        g.launch(k, args)
    off = out.offset + sum(lo * s for lo, s in zip(op.attrs["low"], out.strides, strict=True))
    st = tuple(s * (it + 1) for s, it in zip(out.strides, op.attrs["interior"], strict=True))
    g.copy(x.shape, g.loc(x), x.dtype, Loc(out.storage, off, st))


# -- matrix products ----------------------------------------------------------------------------
@emitter("matmul")
def _matmul(g: FnGen, op: Op) -> None:
    a, b_ = op.operands
    r = op.result
    if r.type.size == 0:
        return
    la, lb = g.operand_loc(g.op_index, 0, a), g.operand_loc(g.op_index, 1, b_)
    if g.mg.target.blas and r.dtype.kind == "f" and a.shape[-1] > 0:
        _gemm(g, a, b_, r, la, lb)
    else:
        _matmul_loops(g, a, b_, r, la, lb)


# A GEMM (or a batch of them) of at least this many multiply-adds is split into tiles over
# Yota's helper pool (runtime/pool.py's yota_<s|d>gemm_tiles); each tile gets at least
# GEMM_TILE_MACS of them and there are up to GEMM_TILES_PER_THREAD tiles per thread,
# claimed dynamically; a batch is split by whole matrices first. Each tile repacks the
# operand it shares with the others (128x784x512 f32 on one thread: 1.04 ms whole,
# 1.08 in 4 column tiles, 1.14 in 8), so two per thread: the W3 MLP's gradient 1.85 ms
# (min of 4 interleaved runs) against 2.00 with four per thread, W9 2.44 against 2.53.
GEMM_PAR_MACS = 1 << 20
GEMM_TILE_MACS = 1 << 18
GEMM_TILES_PER_THREAD = 2


def gemm_split(m: int, n: int, k: int, threads: int, nbatch: int = 1) -> tuple[int, int] | None:
    """``(axis, step)`` for a tiled GEMM of ``nbatch`` products (axis 0 splits C's rows,
    1 its columns; ``step`` rows or columns per tile), or None to make plain calls."""
    macs = m * n * k
    if threads < 2 or macs * nbatch < GEMM_PAR_MACS:
        return None
    want = min(threads * GEMM_TILES_PER_THREAD, macs * nbatch // GEMM_TILE_MACS)
    # split the longer side of C: each tile packs the whole other operand, so the tiles
    # then repack the smaller one (784x128x512: 0.57 ms by rows, 0.65-0.74 by columns)
    axis, dim = (0, m) if m >= n else (1, n)
    tiles = min(-(-want // nbatch), macs // GEMM_TILE_MACS, dim)
    if tiles <= 1:
        return (axis, dim) if nbatch > 1 else None
    step = -(-dim // tiles)
    if dim >= 8 * tiles:
        step = -(-step // 8) * 8  # whole register blocks of the BLAS kernels
    return (axis, step) if step < dim or nbatch > 1 else None


def _batch_stride(loc: Loc, shape: tuple[int, ...], nb: int) -> int | None:
    """The one element stride that walks the batch axes of ``loc`` in order (C order over
    the first ``nb`` axes), or None if they do not flatten to one stride."""
    if nb == 0:
        return 0
    st, sh = loc.strides[:nb], shape[:nb]
    for i in range(nb - 1):
        if sh[i + 1] != 1 and st[i] != st[i + 1] * sh[i + 1]:
            return None
    inner = [s for s, d in zip(st, sh, strict=True) if d != 1]
    return inner[-1] if inner else 0


def _gemm(g: FnGen, a: Value, b_: Value, r: Value, la: Loc, lb: Loc) -> None:
    m, kk, n = a.shape[-2], a.shape[-1], b_.shape[-1]
    ta, lda = blas_matrix(la, a.shape)  # type: ignore[misc]
    tb, ldb = blas_matrix(lb, b_.shape)  # type: ignore[misc]
    ft = reg_type(r.dtype)
    args = [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]
    lr = g.loc(r)
    bshape, nb = r.shape[:-2], r.ndim - 2
    nbatch = int(np.prod(bshape)) if bshape else 1
    threads = g.mg.options.threads
    strides = [_batch_stride(loc, v.shape, nb) for loc, v in ((la, a), (lb, b_), (lr, r))]
    flat = all(s is not None for s in strides) and nbatch > 1
    split = gemm_split(m, n, kk, threads, nbatch if flat else 1)
    extra: list[ir.Value] = []
    if split is None:
        name = "yota_sgemm" if r.dtype.itemsize == 4 else "yota_dgemm"
    else:
        name = GEMM_TILES[r.dtype.name]
        args += [I64] * TILE_EXTRA
        if flat:  # the whole batch in one tiled call
            extra = [i64(nbatch), *(i64(s or 0) for s in strides)]
            bshape = ()
        else:
            extra = [i64(1), i64(0), i64(0), i64(0)]
        extra += [i64(split[0]), i64(split[1]), i64(threads)]
    gemm = declare(g.mg.module, name, ir.VoidType(), args)

    def one(idx: list[ir.Value]) -> None:
        b = g.b
        pa = g.elem_ptr(la, a.dtype, linear(b, idx, la.strides[:len(idx)]))
        pb = g.elem_ptr(lb, b_.dtype, linear(b, idx, lb.strides[:len(idx)]))
        pc = g.elem_ptr(lr, r.dtype, linear(b, idx, lr.strides[:len(idx)]))
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        b.call(gemm, [c32(101), c32(112 if ta else 111), c32(112 if tb else 111),
                      i64(m), i64(n), i64(kk), ir.Constant(ft, 1.0), pa, i64(lda), pb,
                      i64(ldb), ir.Constant(ft, 0.0), pc, i64(max(1, n))] + extra)
    nest(g.b, bshape, one, name="bat")


def _matmul_loops(g: FnGen, a: Value, b_: Value, r: Value, la: Loc, lb: Loc) -> None:
    """C[..., i, j] = sum_k A[..., i, k] B[..., k, j] as a kernel over (..., i, k, j)."""
    nb = r.ndim - 2
    dom = r.shape[:-1] + (a.shape[-1],) + r.shape[-1:]
    red = (False,) * (nb + 1) + (True, False)
    args = KernelArgs()
    k = Kernel(dom, red)
    sa, sb, sr = la.strides, lb.strides, g.loc(r).strides
    x = k.read(g.access(args, la, a.dtype, sa[:nb] + (sa[-2], sa[-1], 0)))
    y = k.read(g.access(args, lb, b_.dtype, sb[:nb] + (0, sb[-2], sb[-1])))
    k.reduction("sum", k.op("mul", (x, y), r.dtype),
                g.access(args, g.loc(r), r.dtype, sr[:nb] + (sr[-2], 0, sr[-1])))
    g.launch(k, args)


# -- indexing ---------------------------------------------------------------------------------
def _index_value(g: FnGen, idx_vals: list[Value], locs: list[Loc], at: list[ir.Value],
                 m: int, dim: int, record: dict[str, Any]) -> ir.Value:
    """Index array ``m`` at ``at``, made non-negative; fails the call if out of range."""
    b = g.b
    v = idx_vals[m]
    p = g.elem_ptr(locs[m], v.dtype, linear(b, at, locs[m].strides))
    raw = b.load(p, typ=mem_type(v.dtype))
    if v.dtype.itemsize < 8:
        raw = b.sext(raw, I64)
    i = b.select(b.icmp_signed("<", raw, i64(0)), b.add(raw, i64(dim)), raw)
    bad = b.or_(b.icmp_signed("<", i, i64(0)), b.icmp_signed(">=", i, i64(dim)))
    g.fail_if(bad, record, raw)
    return i


def _indexed(g: FnGen, op: Op, big: Value, small: Value, axis: int,
             body: Callable[[ir.Value, ir.Value], None], first: int = 1) -> None:
    """Walk ``small`` (the gathered shape); ``body(small_offset, big_offset)``. The index
    arrays are the operands from ``first`` on."""
    idx_vals = list(op.operands[first:])
    locs = [g.operand_loc(g.op_index, first + m, v) for m, v in enumerate(idx_vals)]
    nk, ni = len(idx_vals), idx_vals[0].ndim
    ls, lb = g.loc(small), g.loc(big)

    def each(at: list[ir.Value]) -> None:
        pre, mid, post = at[:axis], at[axis:axis + ni], at[axis + ni:]
        ids = [_index_value(g, idx_vals, locs, mid, m, big.shape[axis + m],
                            index_record(op, g.op_index, m)) for m in range(nk)]
        so = linear(g.b, at, ls.strides, ls.offset)
        bo = linear(g.b, pre + ids + post, lb.strides, lb.offset)
        body(so, bo)
    nest(g.b, small.shape, each, name="idx")


@emitter("gather")
def _gather(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    mt = mem_type(r.dtype)
    ls, lx = g.loc(r), g.loc(x)

    def body(so: ir.Value, bo: ir.Value) -> None:
        v = g.b.load(g.b.gep(g.bases[lx.storage], [bo], source_etype=mt), typ=mt)
        g.b.store(v, g.b.gep(g.bases[ls.storage], [so], source_etype=mt))
    if r.type.size:
        _indexed(g, op, x, r, op.attrs["axis"], body)


@emitter("scatter_add")
def _scatter_add(g: FnGen, op: Op) -> None:
    u, r = op.operands[0], op.result
    if r.type.size == 0:
        return
    args = KernelArgs()
    k = fill_kernel(r.shape, g.access(args, g.loc(r), r.dtype), 0)
    g.launch(k, args)
    mt = mem_type(r.dtype)
    lu, lr = g.loc(u), g.loc(r)
    kind = r.dtype.kind

    def body(so: ir.Value, bo: ir.Value) -> None:
        b = g.b
        x = b.load(b.gep(g.bases[lu.storage], [so], source_etype=mt), typ=mt)
        p = b.gep(g.bases[lr.storage], [bo], source_etype=mt)
        old = b.load(p, typ=mt)
        new = b.fadd(old, x) if kind == "f" else b.or_(old, x) if kind == "b" else b.add(old, x)
        b.store(new, p)
    if u.type.size:
        _indexed(g, op, r, u, op.attrs["axis"], body)


@emitter("scatter")
def _scatter(g: FnGen, op: Op) -> None:
    """``x`` copied (unless the plan put the result in place of ``x``), then each update
    stored at its index, in order (the last of repeated indices wins)."""
    x, u = op.operands[:2]
    r = op.result
    lr, lx = g.loc(r), g.operand_loc(g.op_index, 0, x)
    if lx != lr:
        g.copy(r.shape, lx, r.dtype, lr)
    mt = mem_type(r.dtype)
    lu = g.operand_loc(g.op_index, 1, u)

    def body(so: ir.Value, bo: ir.Value) -> None:
        b = g.b
        v = b.load(b.gep(g.bases[lu.storage], [so], source_etype=mt), typ=mt)
        b.store(v, b.gep(g.bases[lr.storage], [bo], source_etype=mt))
    if u.type.size:
        _indexed(g, op, r, u, op.attrs["axis"], body, first=2)


# -- arg reductions -------------------------------------------------------------------------
@emitter("argmax", "argmin")
def _argext(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    axis, is_max = op.attrs["axis"], op.name == "argmax"
    lx, lr = g.loc(x), g.loc(r)
    kept = [a for a in range(x.ndim) if a != axis]
    mt, kind = mem_type(x.dtype), x.dtype.kind

    def each(at: list[ir.Value]) -> None:
        b = g.b
        full = at[:axis] + [i64(0)] + at[axis:]
        base = linear(b, full, lx.strides, lx.offset)
        load = lambda i: b.load(b.gep(g.bases[lx.storage],  # noqa: E731
                                      [b.add(base, b.mul(i, i64(lx.strides[axis])))],
                                      source_etype=mt), typ=mt)
        first = load(i64(0))

        def step(i: ir.Value, st: list[ir.Value]) -> list[ir.Value]:
            best, bi = st
            v = load(i)
            better = _better(b, kind, is_max, v, best)
            return [b.select(better, v, best), b.select(better, i, bi)]
        _, bi = loop(b, 1, x.shape[axis], 1, [first, i64(0)], step, name="arg")
        b.store(bi, g.elem_ptr(lr, r.dtype, linear(b, at, lr.strides)))
    nest(g.b, tuple(x.shape[a] for a in kept), each, name="argo")


def _better(b: ir.IRBuilder, kind: str, is_max: bool, v: ir.Value, best: ir.Value) -> ir.Value:
    """NumPy's rule: the first extreme wins, and the first NaN beats everything."""
    pred = ">" if is_max else "<"
    if kind == "f":
        return b.or_(b.fcmp_ordered(pred, v, best),
                     b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", best, best)))
    if kind == "b":
        return b.icmp_unsigned(pred, v, best)
    return b.icmp_signed(pred, v, best)


# -- guards and calls -----------------------------------------------------------------------
@emitter("guard")
def _guard(g: FnGen, op: Op) -> None:
    x = op.operands[0]
    b = g.b
    mt = mem_type(x.dtype)
    raw = b.load(g.elem_ptr(g.loc(x), x.dtype), typ=mt)
    ok = _guard_holds(b, x.dtype, raw, op.attrs["kind"], op.attrs["expected"])
    g.fail_if(b.not_(ok), guard_record(op, g.op_index), raw)


def _guard_holds(b: ir.IRBuilder, dt: np.dtype, raw: ir.Value, kind: str, expected: Any
                 ) -> ir.Value:
    """``guard_holds`` of ``yota.ir.ops.misc`` on one loaded element."""
    k = dt.kind
    if kind == "bool":
        truth = (b.fcmp_unordered("!=", raw, ir.Constant(raw.type, 0.0)) if k == "f"
                 else b.icmp_unsigned("!=", raw, ir.Constant(raw.type, 0)))
        return b.icmp_unsigned("==", truth, ir.Constant(I1, int(bool(expected))))
    as_f64 = (b.fpext(raw, F64) if raw.type == F32 else raw if raw.type == F64
              else b.uitofp(raw, F64) if k == "b" else b.sitofp(raw, F64))
    if kind == "int":
        if k == "f":
            t = b.call(declare(b.module, "llvm.trunc.f64", F64, [F64]), [as_f64])
            return b.fcmp_ordered("==", t, ir.Constant(F64, float(int(expected))))
        ext = b.zext(raw, I64) if k == "b" else b.sext(raw, I64) if raw.type != I64 else raw
        return b.icmp_signed("==", ext, i64(int(expected)))
    e = float(expected)
    if e != e:
        return b.fcmp_unordered("uno", as_f64, as_f64)
    return b.fcmp_ordered("==", as_f64, ir.Constant(F64, e))


@emitter("loop")
def _loop(g: FnGen, op: Op) -> None:
    from .loop import emit_loop

    emit_loop(g, op)


@emitter("call")
def _call(g: FnGen, op: Op) -> None:
    callee = g.fn.callees[op.attrs["callee"]]
    if "row_block" in callee.attrs:  # a row-tiled function: run block by block
        from .tiled import emit_tiled_call
        emit_tiled_call(g, op, callee)
        return
    llfn, ws = g.mg.function(callee)
    b = g.b
    ptrs = [g.elem_ptr(g.operand_loc(g.op_index, k, v), v.dtype)
            for k, v in enumerate(op.operands)]
    ptrs += [g.elem_ptr(g.loc(r), r.dtype) for r in op.results]
    ptrs += [g.scratch(ws), g.status]
    slots = g.ab.alloca(ir.ArrayType(PTR, len(ptrs)))
    for k, p in enumerate(ptrs):
        b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))
    rc = b.call(llfn, [slots])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), likely=False):
        b.ret(rc)
