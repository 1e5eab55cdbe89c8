"""The op -> emitter table of the cuda backend: the shared emitters (``backends/emit.py``)
plus the ones that become special kernels (``special.py``: concatenate, pad, indexing,
arg-reductions, guards) or steps (cuBLAS products, cuSOLVER factorizations, memsets,
calls). Each renders one op from the locations the layout chose (``g.loc``); none of
them analyses the program."""

from __future__ import annotations

import numpy as np
from yota.ir.core import Op, Value
from yota.ir.ops.lapack import FAILURES as LINALG_FAILURES
from yota.ir.ops.lapack import LAPACK_OPS

from ..emit import new_table
from ..failures import guard_record, index_record, linalg_record
from ..layout import Loc
from ..program import STATUS, Call, Callback, Gemm, Linalg, Loop, Memset, View
from .lower import FnGen
from .special import (
    Strided,
    render_argext,
    render_concat,
    render_guard,
    render_indexed,
    render_pad,
)

EMITTERS, emitter = new_table()


@emitter("concatenate")
def _concatenate(g: FnGen, op: Op) -> None:
    """One kernel per ``CONCAT_PARTS`` operands, each filling its slab of the output."""
    r, axis = op.result, op.attrs["axis"]
    out = g.loc(r)
    starts = np.cumsum([0] + [v.shape[axis] for v in op.operands])
    parts = [(int(starts[j]), v) for j, v in enumerate(op.operands) if v.type.size]
    for k in range(0, len(parts), CONCAT_PARTS):
        chunk = parts[k:k + CONCAT_PARTS]
        shape = list(r.shape)
        shape[axis] = sum(v.shape[axis] for _, v in chunk)
        dst = Loc(out.storage, out.offset + chunk[0][0] * out.strides[axis], out.strides)
        src = render_concat(g.cfg, shape=tuple(shape), axis=axis, out=_strided(dst, r),
                            parts=[(v.shape[axis], _strided(g.loc(v), v)) for _, v in chunk])
        refs = [g.ref(dst, r.dtype)] + [g.ref(g.loc(v), v.dtype) for _, v in chunk]
        g.special(src, g.grid_for(int(np.prod(shape))), refs)


CONCAT_PARTS = 24  # pointer parameters of one kernel, besides the output


@emitter("pad")
def _pad(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    if r.type.size == 0:
        return
    out = g.loc(r)
    src = render_pad(g.cfg, shape=r.shape, low=op.attrs["low"], interior=op.attrs["interior"],
                     x_shape=x.shape, x=_strided(g.loc(x), x), out=_strided(out, r))
    g.special(src, g.grid_for(r.type.size), [g.ref(out, r.dtype), g.ref(g.loc(x), x.dtype)])


# -- matrix products (cuBLAS through CuPy) -----------------------------------------------------
def _view_of(g: FnGen, loc: Loc, v: Value) -> View:
    item = v.dtype.itemsize
    return View(g.ref(loc, v.dtype), v.shape, tuple(s * item for s in loc.strides), v.dtype)


@emitter("matmul")
def _matmul(g: FnGen, op: Op) -> None:
    a, b = op.operands
    r = op.result
    if r.type.size == 0:
        return
    if a.shape[-1] == 0:
        g.steps.append(Memset(g.ref(g.loc(r), r.dtype), r.type.nbytes))
        return
    g.steps.append(Gemm(_view_of(g, g.loc(a), a), _view_of(g, g.loc(b), b),
                        _view_of(g, g.loc(r), r)))


# -- linear algebra (cuSOLVER through CuPy) ---------------------------------------------------
@emitter(*LAPACK_OPS)
def _lapack(g: FnGen, op: Op) -> None:
    """A step the runtime runs through ``cupy.linalg`` (the device's ``linalg``) on views
    of the operands and results; a failure on the values raises the op's record."""
    if not any(r.type.size for r in op.results):
        return
    code = (g.failure(linalg_record(op, g.op_index, op.name))
            if op.name in LINALG_FAILURES else 0)
    g.steps.append(Linalg(op.name, tuple(sorted(op.attrs.items())),
                          tuple(_view_of(g, g.loc(v), v) for v in op.operands),
                          tuple(_view_of(g, g.loc(r), r) for r in op.results), code))


# -- opaque primitives: their Python function on the host -----------------------------------------
@emitter("callback")
def _callback(g: FnGen, op: Op) -> None:
    """A step the runtime runs on the host: the operands copied from the device, the
    function called, its results copied to the device."""
    g.steps.append(Callback(op.attrs["fn"], op.attrs["static"],
                            tuple(_view_of(g, g.loc(v), v) for v in op.operands),
                            tuple(_view_of(g, g.loc(r), r) for r in op.results), op.loc))


# -- indexing ------------------------------------------------------------------------------------
def _strided(loc: Loc, v: Value) -> Strided:
    return Strided(0, loc.strides, v.dtype)


def _indexed(g: FnGen, op: Op, *, scatter: bool, overwrite: bool = False) -> None:
    big, small = (op.result, op.operands[1 if overwrite else 0]) if scatter else (
        op.operands[0], op.result)
    idx = list(op.operands[2 if overwrite else 1:])
    axis = op.attrs["axis"]
    if overwrite:  # scatter: x copied (unless in place), then the updates stored
        lx = g.operand_loc(g.op_index, 0, op.operands[0])
        if lx != g.loc(big):
            g.copy(big.shape, lx, big.dtype, g.loc(big))
    elif scatter and big.type.size:
        g.steps.append(Memset(g.ref(g.loc(big), big.dtype), big.type.nbytes))
    if small.type.size == 0:
        return
    codes = [g.failure(index_record(op, g.op_index, m)) for m in range(len(idx))]
    src = render_indexed(g.cfg, scatter=scatter, overwrite=overwrite, small_shape=small.shape,
                         big_shape=big.shape, axis=axis, small=_strided(g.loc(small), small),
                         big=_strided(g.loc(big), big),
                         idx=[_strided(g.loc(v), v) for v in idx], codes=codes)
    refs = [g.ref(g.loc(small), small.dtype), g.ref(g.loc(big), big.dtype)]
    refs += [g.ref(g.loc(v), v.dtype) for v in idx] + [(STATUS, 0)]
    g.special(src, g.grid_for(small.type.size), refs)


@emitter("gather")
def _gather(g: FnGen, op: Op) -> None:
    _indexed(g, op, scatter=False)


@emitter("scatter")
def _scatter(g: FnGen, op: Op) -> None:
    """Where an index repeats, one of the updates wins (NumPy does not say which)."""
    _indexed(g, op, scatter=True, overwrite=True)


@emitter("scatter_add")
def _scatter_add(g: FnGen, op: Op) -> None:
    _indexed(g, op, scatter=True)


@emitter("argmax", "argmin")
def _argext(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    if r.type.size == 0:
        return
    src = render_argext(g.cfg, is_max=op.name == "argmax", shape=x.shape, axis=op.attrs["axis"],
                        x=_strided(g.loc(x), x), out=_strided(g.loc(r), r))
    g.special(src, g.grid_for(r.type.size), [g.ref(g.loc(x), x.dtype),
                                             g.ref(g.loc(r), r.dtype)])


# -- guards and calls ----------------------------------------------------------------------------
@emitter("guard")
def _guard(g: FnGen, op: Op) -> None:
    x = op.operands[0]
    code = g.failure(guard_record(op, g.op_index))
    src = render_guard(g.cfg, dt=x.dtype, off=0, kind=op.attrs["kind"],
                       expected=op.attrs["expected"], code=code)
    g.special(src, (1, 1, 1), [g.ref(g.loc(x), x.dtype), (STATUS, 0)], block=1)


@emitter("call")
def _call(g: FnGen, op: Op) -> None:
    callee = g.fn.callees[op.attrs["callee"]]
    plan = g.function(callee)
    ins = [g.ref(g.operand_loc(g.op_index, k, v), v.dtype) for k, v in enumerate(op.operands)]
    outs = tuple(g.ref(g.loc(r), r.dtype) for r in op.results)
    g.steps.append(Call(callee.name, tuple(ins), outs, g.scratch(plan.ws_bytes)))


@emitter("loop")
def _loop(g: FnGen, op: Op) -> None:
    """The body's steps once per step (``Loop``); the initial carried values are copied
    into the buffers step 0 reads: the result's, or a scratch region, so that the last
    step writes the result."""
    from yota.ir.ops.loop import LoopShape

    body = g.fn.callees[op.attrs["callee"]]
    sh = LoopShape.of(op.attrs)
    outer = g.mod.loops.get(g.fn.name, [])
    g.mod.loops[body.name] = outer + [sh.length]
    plan = g.function(body)
    carries = []
    for k, r in enumerate(op.results[:sh.carries]):
        res = g.loc(r)
        tmp = (g.scratch(r.type.nbytes)[0], 0) if r.type.nbytes else (-1, 0)
        pair = ((res.storage, res.offset * r.dtype.itemsize), tmp)
        first, second = pair if sh.length % 2 == 0 else pair[::-1]
        if r.type.nbytes:
            dst = g.loc(r) if first == pair[0] else Loc(tmp[0], 0, res.strides)
            g.copy(r.shape, g.operand_loc(g.op_index, k, op.operands[k]), r.dtype, dst)
        carries.append((first, second))
    ins = [(g.ref(g.operand_loc(g.op_index, k, v), v.dtype), v.type.nbytes // max(sh.length, 1))
           for k, v in enumerate(op.operands) if sh.carries <= k < sh.carries + sh.stacked]
    inv = [g.ref(g.operand_loc(g.op_index, k, v), v.dtype)
           for k, v in enumerate(op.operands) if k >= sh.carries + sh.stacked]
    outs = [(g.ref(g.loc(r), r.dtype), r.type.nbytes // max(sh.length, 1))
            for r in op.results[sh.carries:]]
    g.steps.append(Loop(body.name, sh.length, sh.reverse, tuple(carries), tuple(ins),
                        tuple(inv), tuple(outs), g.scratch(plan.ws_bytes)))
