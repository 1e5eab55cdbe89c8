"""The emitters every target shares: ops that become kernels of the shared kernel model
(elementwise ops, fused kernels, reductions, ``sum_to``), copies of materialized shape
ops, and constants (placed by the layout: no code). Each renders one op from the
locations the layout chose (``g.loc``) through the lowering's ``access``, ``launch`` and
``copy`` (``backends/lowering.py``); none of them analyses the program.

A target's table starts as ``new_table()``: the shared emitters, and a decorator that
enters the target's own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from yota.ir.core import Op, Value
from yota.ir.ops import OPS
from yota.ir.ops.fused import kernel_domain
from yota.ir.ops.misc import splat_scalar

from .kernel import Kernel, contiguous_strides
from .layout import SHAPE_OPS, Loc
from .lowering import Emitter, FnLowering, KernelArgs

_SHARED: dict[str, Emitter] = {}


def register(table: dict[str, Emitter], *names: str) -> Callable[[Emitter], Emitter]:
    """A decorator that enters an emitter in ``table`` for ``names``."""
    def reg(f: Emitter) -> Emitter:
        for n in names:
            table[n] = f
        return f
    return reg


def new_table() -> tuple[dict[str, Emitter], Callable[..., Callable[[Emitter], Emitter]]]:
    """A new table holding the shared emitters, and its ``@emitter(names...)`` decorator."""
    t = dict(_SHARED)
    return t, lambda *names: register(t, *names)


# -- kernels: elementwise, fused, reductions ---------------------------------------------------
def elementwise(g: FnLowering, op: Op) -> None:
    r = op.result
    args = KernelArgs()
    k = Kernel(r.shape, (False,) * r.ndim)
    ids = tuple(k.read(g.access(args, g.loc(v), v.dtype)) for v in op.operands)
    k.store(k.op(op.name, ids, r.dtype, op.attrs), g.access(args, g.loc(r), r.dtype))
    g.launch(k, args)


for _name, _def in OPS.items():
    if _def.elementwise and _name != "broadcast":
        _SHARED[_name] = elementwise


@register(_SHARED, "fused")
def _fused(g: FnLowering, op: Op) -> None:
    """A fused body as one kernel: its reads first (broadcast inputs, then direct ones),
    then its ops in order; reductions write with zero strides on the reduced axes."""
    body = g.fn.callees[op.attrs["callee"]]
    domain, axes = kernel_domain(body)
    red = tuple(a in (axes or ()) for a in range(len(domain)))
    args = KernelArgs()
    k = Kernel(domain, red)
    env: dict[Value, int] = {}
    inputs = dict(zip(body.inputs, op.operands, strict=True))
    for bop in body.ops:
        if bop.name == "broadcast":
            v = inputs[bop.operands[0]]
            env[bop.result] = k.read(g.access(args, g.loc(v), v.dtype,
                                              bcast_strides(g.loc(v), v.shape, domain)))
    for bv, v in inputs.items():
        if bv.shape == domain and any(bv in o.operands for o in body.ops
                                      if o.name != "broadcast"):
            env[bv] = k.read(g.access(args, g.loc(v), v.dtype))
    for bop in body.ops:
        if bop.name == "broadcast":
            continue
        if bop.name == "const":
            value = splat_scalar(bop.attrs["value"]) if bop.result.type.size else 0
            env[bop.result] = k.const(value, bop.result.dtype)
        elif bop.name == "iota":
            env[bop.result] = iota_node(k, bop.attrs["axis"], bop.result.dtype)
        elif bop.name in ("sum", "max", "min", "prod"):
            env[bop.result] = env[bop.operands[0]]
        else:
            env[bop.result] = k.op(bop.name, tuple(env[v] for v in bop.operands),
                                   bop.result.dtype, bop.attrs)
    reduced = {bop.result: bop for bop in body.ops if bop.name in ("sum", "max", "min")}
    for bv, r in zip(body.outputs, op.results, strict=True):
        if bv in reduced:
            st = reduced_strides(g.loc(r), red)
            k.reduction(reduced[bv].name, env[bv], g.access(args, g.loc(r), r.dtype, st))
        else:
            k.store(env[bv], g.access(args, g.loc(r), r.dtype))
    g.launch(k, args)


def iota_node(k: Kernel, axis: int, dtype: np.dtype) -> int:
    """The index along domain axis ``axis``, as ``dtype`` (an ``iota``)."""
    vid = k.index(tuple(int(a == axis) for a in range(len(k.domain))))
    dt = np.dtype(dtype)
    return vid if dt == k.nodes[vid].dtype else k.op("convert", (vid,), dt, {"dtype": dt})


@register(_SHARED, "iota")
def _iota(g: FnLowering, op: Op) -> None:
    """An ``iota`` alone (not fused): a kernel of its shape storing its index."""
    r = op.result
    args = KernelArgs()
    k = Kernel(r.shape, (False,) * r.ndim)
    k.store(iota_node(k, op.attrs["axis"], r.dtype), g.access(args, g.loc(r), r.dtype))
    g.launch(k, args)


def bcast_strides(loc: Loc, shape: tuple[int, ...], domain: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(domain) - len(shape)
    return (0,) * lead + tuple(0 if d == 1 and o != 1 else s
                               for d, o, s in zip(shape, domain[lead:], loc.strides, strict=True))


def reduced_strides(loc: Loc, red: tuple[bool, ...]) -> tuple[int, ...]:
    """Strides over the domain of a reduction result: 0 on reduced axes."""
    it = iter(loc.strides)
    return tuple(0 if r else next(it) for r in red)


def _reduce(g: FnLowering, op: Op, kind: str, x: Value, red: tuple[bool, ...],
            out_strides: tuple[int, ...]) -> None:
    r = op.result
    args = KernelArgs()
    k = Kernel(x.shape, red)
    vid = k.read(g.access(args, g.loc(x), x.dtype))
    k.reduction(kind, vid, g.access(args, g.loc(r), r.dtype, out_strides))
    g.launch(k, args)


@register(_SHARED, "sum", "prod", "max", "min")
def _reduction(g: FnLowering, op: Op) -> None:
    x = op.operands[0]
    red = tuple(a in op.attrs["axes"] for a in range(x.ndim))
    _reduce(g, op, op.name, x, red, reduced_strides(g.loc(op.result), red))


@register(_SHARED, "sum_to")
def _sum_to(g: FnLowering, op: Op) -> None:
    x, r = op.operands[0], op.result
    lead = x.ndim - r.ndim
    red = tuple(a < lead or (r.shape[a - lead] == 1 and x.shape[a] != 1) for a in range(x.ndim))
    st = g.loc(r).strides
    _reduce(g, op, "sum", x, red, tuple(0 if red[a] else st[a - lead] for a in range(x.ndim)))


# -- shape ops and constants -------------------------------------------------------------------
@register(_SHARED, *SHAPE_OPS)
def _shape(g: FnLowering, op: Op) -> None:
    """A view needs no code; a materialized shape op is a copy (strided, where the layout
    found strides for it; else, a reshape, in the source's element order)."""
    r = op.result
    if r not in g.lay.materialize:
        return
    x = op.operands[0]
    src = g.lay.materialize[r]
    if src is not None:
        g.copy(r.shape, src, r.dtype, g.loc(r))
    else:
        dst = Loc(g.loc(r).storage, g.loc(r).offset, contiguous_strides(x.shape))
        g.copy(x.shape, g.loc(x), x.dtype, dst)


@register(_SHARED, "update_slice")
def _update_slice(g: FnLowering, op: Op) -> None:
    """``x`` copied (unless the plan put the result in place of ``x``), then the update
    copied into the strided region."""
    x, u = op.operands
    r = op.result
    out, lx = g.loc(r), g.operand_loc(g.op_index, 0, x)
    if lx != out:
        g.copy(r.shape, lx, r.dtype, out)
    start, step = op.attrs["start"], op.attrs["step"]
    off = out.offset + sum(a * s for a, s in zip(start, out.strides, strict=True))
    st = tuple(s * c for s, c in zip(out.strides, step, strict=True))
    g.copy(u.shape, g.operand_loc(g.op_index, 1, u), u.dtype, Loc(out.storage, off, st))


@register(_SHARED, "const")
def _const(g: FnLowering, op: Op) -> None:
    """Constants are placed by the layout (globals, uploads or splats): no code."""
