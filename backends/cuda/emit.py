"""The op -> emitter table. Each emitter renders one op from the locations the layout
chose (``g.loc``) into kernels and steps; none of them analyses the program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from yota.ir.core import Op, Value
from yota.ir.ops import OPS
from yota.ir.ops.fused import kernel_domain
from yota.ir.ops.misc import splat_scalar

from .kernel import Kernel, contiguous_strides
from .layout import Loc, is_contiguous, view_loc
from .lower import STATUS, Call, FnGen, Gemm, KernelArgs, Memset, View
from .special import (
    Strided,
    render_argext,
    render_concat,
    render_guard,
    render_indexed,
    render_pad,
)

Emitter = Callable[[FnGen, Op], None]
EMITTERS: dict[str, Emitter] = {}


def emitter(*names: str) -> Callable[[Emitter], Emitter]:
    def reg(f: Emitter) -> Emitter:
        for n in names:
            EMITTERS[n] = f
        return f
    return reg


# -- kernels: elementwise, fused, reductions ----------------------------------------------------
def elementwise(g: FnGen, op: Op) -> None:
    r = op.result
    args = KernelArgs()
    k = Kernel(r.shape, (False,) * r.ndim)
    ids = tuple(k.read(g.access(args, g.loc(v), v.dtype)) for v in op.operands)
    k.store(k.op(op.name, ids, r.dtype), g.access(args, g.loc(r), r.dtype))
    g.launch(k, args)


for _name, _def in OPS.items():
    if _def.elementwise and _name != "broadcast":
        EMITTERS[_name] = elementwise


@emitter("fused")
def _fused(g: FnGen, op: Op) -> None:
    body = g.fn.callees[op.attrs["callee"]]
    domain, axes = kernel_domain(body)
    red = tuple(a in (axes or ()) for a in range(len(domain)))
    args = KernelArgs()
    k = Kernel(domain, red)
    env: dict[Value, int] = {}
    inputs = dict(zip(body.inputs, op.operands, strict=True))
    for bv, v in inputs.items():
        if bv.shape == domain and any(bv in o.operands for o in body.ops
                                      if o.name != "broadcast"):
            env[bv] = k.read(g.access(args, g.loc(v), v.dtype))
    for bop in body.ops:
        if bop.name == "broadcast":
            v = inputs[bop.operands[0]]
            env[bop.result] = k.read(g.access(args, g.loc(v), v.dtype,
                                              bcast_strides(g.loc(v), v.shape, domain)))
        elif bop.name == "const":
            value = splat_scalar(bop.attrs["value"]) if bop.result.type.size else 0
            env[bop.result] = k.const(value, bop.result.dtype)
        elif bop.name in ("sum", "max", "min", "prod"):
            env[bop.result] = env[bop.operands[0]]
        else:
            env[bop.result] = k.op(bop.name, tuple(env[v] for v in bop.operands),
                                   bop.result.dtype)
    reduced = {bop.result: bop for bop in body.ops if bop.name in ("sum", "max", "min")}
    for bv, r in zip(body.outputs, op.results, strict=True):
        if bv in reduced:
            st = reduced_strides(g.loc(r), red)
            k.reduction(reduced[bv].name, env[bv], g.access(args, g.loc(r), r.dtype, st))
        else:
            k.store(env[bv], g.access(args, g.loc(r), r.dtype))
    g.launch(k, args)


def bcast_strides(loc: Loc, shape: tuple[int, ...], domain: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(domain) - len(shape)
    return (0,) * lead + tuple(0 if d == 1 and o != 1 else s
                               for d, o, s in zip(shape, domain[lead:], loc.strides, strict=True))


def reduced_strides(loc: Loc, red: tuple[bool, ...]) -> tuple[int, ...]:
    """Strides over the domain of a reduction result: 0 on reduced axes."""
    it = iter(loc.strides)
    return tuple(0 if r else next(it) for r in red)


def _reduce(g: FnGen, op: Op, kind: str, x: Value, red: tuple[bool, ...],
            out_strides: tuple[int, ...]) -> None:
    r = op.result
    args = KernelArgs()
    k = Kernel(x.shape, red)
    vid = k.read(g.access(args, g.loc(x), x.dtype))
    k.reduction(kind, vid, g.access(args, g.loc(r), r.dtype, out_strides))
    g.launch(k, args)


@emitter("sum", "prod", "max", "min")
def _reduction(g: FnGen, op: Op) -> None:
    x = op.operands[0]
    red = tuple(a in op.attrs["axes"] for a in range(x.ndim))
    _reduce(g, op, op.name, x, red, reduced_strides(g.loc(op.result), red))


@emitter("sum_to")
def _sum_to(g: FnGen, op: Op) -> None:
    x, r = op.operands[0], op.result
    lead = x.ndim - r.ndim
    red = tuple(a < lead or (r.shape[a - lead] == 1 and x.shape[a] != 1) for a in range(x.ndim))
    st = g.loc(r).strides
    _reduce(g, op, "sum", x, red, tuple(0 if red[a] else st[a - lead] for a in range(x.ndim)))


# -- shape ops -------------------------------------------------------------------------------
@emitter("transpose", "broadcast", "slice", "flip", "reshape")
def _view(g: FnGen, op: Op) -> None:
    r = op.result
    if r not in g.lay.materialize:
        return
    x = op.operands[0]
    cand = view_loc(op, g.loc(x), x.shape)
    if cand is not None:
        g.copy(r.shape, cand, r.dtype, g.loc(r))
    else:  # a reshape that strides cannot express: copy in the source's element order
        dst = Loc(g.loc(r).storage, g.loc(r).offset, contiguous_strides(x.shape))
        g.copy(x.shape, g.loc(x), x.dtype, dst)


@emitter("const")
def _const(g: FnGen, op: Op) -> None:
    """Constants are uploaded once (splats as one element): no code."""


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


# -- indexing ------------------------------------------------------------------------------------
def _strided(loc: Loc, v: Value) -> Strided:
    return Strided(0, loc.strides, v.dtype)


def _indexed(g: FnGen, op: Op, *, scatter: bool) -> None:
    big, small = (op.result, op.operands[0]) if scatter else (op.operands[0], op.result)
    idx = list(op.operands[1:])
    axis = op.attrs["axis"]
    if scatter and big.type.size:
        g.steps.append(Memset(g.ref(g.loc(big), big.dtype), big.type.nbytes))
    if small.type.size == 0:
        return
    codes = [g.mod.failure({"kind": "index", "axis": axis + m, "size": big.shape[axis + m],
                            "loc": op.loc, "index": g.op_index}) for m in range(len(idx))]
    src = render_indexed(g.cfg, scatter=scatter, small_shape=small.shape,
                         big_shape=big.shape, axis=axis, small=_strided(g.loc(small), small),
                         big=_strided(g.loc(big), big),
                         idx=[_strided(g.loc(v), v) for v in idx], codes=codes)
    refs = [g.ref(g.loc(small), small.dtype), g.ref(g.loc(big), big.dtype)]
    refs += [g.ref(g.loc(v), v.dtype) for v in idx] + [(STATUS, 0)]
    g.special(src, g.grid_for(small.type.size), refs)


@emitter("gather")
def _gather(g: FnGen, op: Op) -> None:
    _indexed(g, op, scatter=False)


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
    code = g.mod.failure({"kind": "guard", "attrs": {"kind": op.attrs["kind"],
                                                     "expected": _plain(op.attrs["expected"])},
                          "loc": op.loc, "index": g.op_index, "dtype": x.dtype.str})
    src = render_guard(g.cfg, dt=x.dtype, off=0, kind=op.attrs["kind"],
                       expected=op.attrs["expected"], code=code)
    g.special(src, (1, 1, 1), [g.ref(g.loc(x), x.dtype), (STATUS, 0)], block=1)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


@emitter("call")
def _call(g: FnGen, op: Op) -> None:
    callee = g.fn.callees[op.attrs["callee"]]
    plan = g.mod.function(callee)
    ins = []
    for v in op.operands:
        loc = g.loc(v)
        if v.type.nbytes and not is_contiguous(loc, v.shape):
            dst = g.fresh(v)
            g.copy(v.shape, loc, v.dtype, dst)
            loc = dst
        ins.append(g.ref(loc, v.dtype))
    outs = tuple(g.ref(g.loc(r), r.dtype) for r in op.results)
    g.steps.append(Call(callee.name, tuple(ins), outs, g.scratch(plan.ws_bytes)))


def emit_output_copy(g: FnGen, j: int, v: Value) -> None:
    dst = Loc(g.lay.out_storage[j], 0, contiguous_strides(v.shape))
    g.copy(v.shape, g.loc(v), v.dtype, dst)
