"""A ``loop`` op as a native loop around a call of its body's function.

The body is lowered once, as an ordinary function (``ModuleGen.function``). Each step
calls it with pointers to: each carried value as it enters the step, the step's slice of
each stacked operand (contiguous: the layout copies a strided operand first), the
invariants, then the next carried values and the step's slice of each stacked result,
the body's workspace and the status words.

Carried values alternate between two buffers: the loop's result and a scratch region
(the one read first gets the initial value, chosen so that the last step writes the
result), so no step copies its carried values. A failure inside the body (a guard that
does not hold) stops the loop; the step it happened in is written to the status words
(``STEP_WORD``, one word per level of loops in loops) before the failure code is
returned, and the failure's record lists the lengths of the loops around it
(``ModuleGen.loops``), so the error names the step.
"""

from __future__ import annotations

import llvmlite.ir as ir
from yota.ir.core import Op, Value
from yota.ir.ops.loop import LoopShape

from ..failures import STEP_WORD
from .layout import STATUS_BYTES
from .loops import loop
from .lower import FnGen
from .types import I8, I32, I64, PTR, declare, i64


def emit_loop(g: FnGen, op: Op) -> None:
    body = g.fn.callees[op.attrs["callee"]]
    sh = LoopShape.of(op.attrs)
    outer = g.mg.loops.get(g.fn.name, [])
    g.mg.loops[body.name] = outer + [sh.length]
    llfn, ws = g.mg.function(body)
    ins = [g.elem_ptr(g.operand_loc(g.op_index, k, v), v.dtype)
           for k, v in enumerate(op.operands)]
    inits, stacked, inv = sh.split_operands(ins)
    carried = op.results[:sh.carries]
    bufs = [_buffers(g, r, sh.length) for r in carried]
    for (first, _), init, r in zip(bufs, inits, carried, strict=True):
        _memcpy(g, first, init, r.type.nbytes)
    if not sh.length:
        return
    outs = [g.elem_ptr(g.loc(r), r.dtype) for r in op.results[sh.carries:]]
    slabs = [v.type.nbytes // max(v.shape[0], 1) for v in
             op.operands[sh.carries:sh.carries + sh.stacked] + op.results[sh.carries:]]
    fixed = [g.scratch(ws), g.status]
    slots = g.ab.alloca(ir.ArrayType(PTR, len(body.inputs) + len(body.outputs) + 2))
    b = g.b

    def step(t: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
        i = b.sub(i64(sh.length - 1), t) if sh.reverse else t
        odd = b.trunc(t, ir.IntType(1))
        sliced = [_at(b, p, i, n) for p, n in zip(stacked + outs, slabs, strict=True)]
        ptrs = [b.select(odd, nxt, first) for first, nxt in bufs] + sliced[:len(stacked)]
        ptrs += inv + [b.select(odd, first, nxt) for first, nxt in bufs]
        for k, p in enumerate(ptrs + sliced[len(stacked):] + fixed):
            b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))
        _call_body(g, llfn, slots, i, STEP_WORD + 8 * len(outer))
        return []

    loop(b, 0, sh.length, 1, [], step, name="steps")


def _call_body(g: FnGen, llfn: ir.Function, slots: ir.Value, i: ir.Value, step_at: int
               ) -> None:
    """Call the body; on a failure, write the step to the status words and return."""
    b = g.b
    rc = b.call(llfn, [slots])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), likely=False):
        if step_at < STATUS_BYTES:
            b.store(i, b.gep(g.status, [i64(step_at)], source_etype=I8))
        b.ret(rc)


def _buffers(g: FnGen, r: Value, length: int) -> tuple[ir.Value, ir.Value]:
    """(the buffer step 0 reads the carried value ``r`` from, the one it writes): the
    loop's result and a scratch region, alternating, so that the last step writes the
    result."""
    res = g.elem_ptr(g.loc(r), r.dtype)
    tmp = g.scratch(r.type.nbytes)
    return (res, tmp) if length % 2 == 0 else (tmp, res)


def _memcpy(g: FnGen, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
    if nbytes:
        memcpy = declare(g.mg.module, "memcpy", PTR, [PTR, PTR, I64])
        g.b.call(memcpy, [dst, src, i64(nbytes)])


def _at(b: ir.IRBuilder, base: ir.Value, i: ir.Value, slab: int) -> ir.Value:
    """Step ``i``'s slice (``slab`` bytes each) of the stacked array at ``base``."""
    return b.gep(base, [b.mul(i, i64(slab))], source_etype=I8)
