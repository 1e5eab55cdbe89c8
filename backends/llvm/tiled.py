"""A ``call`` of a row-tiled function (``yota.ir.passes.tile``: attributes ``row_count``
and ``row_block``) run block by block of rows.

The function over ``row_block`` rows (and over the ``row_count % row_block`` left at the
end, if any) is lowered as an ordinary function whose kernels stay on one thread; a
*rows* function ``rows(in..., out..., status, ws, part..., lo, hi)`` calls it for each
block of rows in ``[lo, hi)``, with pointers to the block's rows for inputs and results
by rows, the inputs read whole as they are, and its own workspace ``ws`` (so the values
the block's ops pass each other stay in cache). A result reduced over the rows (a column
sum) is the block function's partial result, combined into ``part`` after each block.

Chunks of whole blocks are claimed by this thread and the pool's helpers (``pool.py``,
as a split kernel's chunks are); each thread has its own workspace and partial results,
which are combined into the outputs at the end.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from yota.ir.core import Function, Op, Value
from yota.ir.passes.tile import ROW, block_function, row_statuses

from ..kernel import Access, combine_kernel, fill_kernel, identity, normalize
from .loops import loop
from .lower import CHUNKS_PER_THREAD, FnGen
from .types import I8, I64, PTR, VOID, i64

WS_ALIGN = 64
TILE_CHUNKS = 4  # chunks per thread, times a kernel's: a descheduled helper holds less


class BlockGen(FnGen):
    """A block function's lowering: its kernels run on the calling thread (the blocks
    are what is split over threads)."""

    def _parallel(self, k: Any, params: list[ir.Value], threads: int) -> None:
        self.b.call(self.mg.kernel(k), list(params) + [i64(0), i64(k.domain[0])])


def _align(n: int) -> int:
    return -(-max(n, 1) // WS_ALIGN) * WS_ALIGN


class TiledCall:
    """The code of one ``call`` of a tiled function ``fn``."""

    def __init__(self, g: FnGen, op: Op, fn: Function) -> None:
        self.g, self.op, self.fn = g, op, fn
        self.rows, self.block = int(fn.attrs["row_count"]), int(fn.attrs["row_block"])
        st = row_statuses(fn)
        self.in_rows = [st.get(v) == ROW for v in fn.inputs]
        self.out_kind = [st.get(v, ROW) for v in fn.outputs]  # ROW or a reduction kind
        self.reduced = [j for j, s in enumerate(self.out_kind) if s != ROW]
        self.fns = [self._block_fn(self.block)]
        if self.rows % self.block:
            self.fns.append(self._block_fn(self.rows % self.block))
        # a thread's workspace: the block function's, then the block's reduced results
        self.outs_at: list[int] = []
        off = _align(max(ws for _, ws in self.fns))
        for j in self.reduced:
            self.outs_at.append(off)
            off += _align(fn.outputs[j].type.nbytes)
        self.ws_bytes = off

    def _block_fn(self, n: int) -> tuple[ir.Function, int]:
        mg = self.g.mg
        bf = block_function(self.fn, n, mg.fresh(f"{self.fn.name}.rows{n}"))
        return BlockGen(mg, bf, f"yota.fn.{bf.name}").run()

    # -- the rows function ---------------------------------------------------------------
    def rows_function(self) -> ir.Function:
        fn, mg = self.fn, self.g.mg
        nin, nout, nred = len(fn.inputs), len(fn.outputs), len(self.reduced)
        fty = ir.FunctionType(VOID, [PTR] * (nin + nout + 2 + nred) + [I64, I64])
        f = ir.Function(mg.module, fty, mg.fresh("yota.rows"))
        f.linkage = "internal"
        f.attributes.add("nounwind")
        args = list(f.args)
        ins, outs = args[:nin], args[nin:nin + nout]
        status, ws = args[nin + nout], args[nin + nout + 1]
        parts, (lo, hi) = args[nin + nout + 2:-2], args[-2:]
        b = ir.IRBuilder(f.append_basic_block("entry"))
        slots = b.alloca(ir.ArrayType(PTR, nin + nout + 2))
        red_out = {j: b.gep(ws, [i64(at)], source_etype=I8)
                   for j, at in zip(self.reduced, self.outs_at, strict=True)}

        def put(k: int, p: ir.Value) -> None:
            b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))

        def step(blo: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            for k, (v, p) in enumerate(zip(fn.inputs, ins, strict=True)):
                put(k, self._row_ptr(b, p, v, blo) if self.in_rows[k] else p)
            for j, (v, p) in enumerate(zip(fn.outputs, outs, strict=True)):
                put(nin + j, red_out[j] if j in red_out else self._row_ptr(b, p, v, blo))
            put(nin + nout, ws)
            put(nin + nout + 1, status)
            self._call_block(b, blo, hi, slots)
            for j, part in zip(self.reduced, parts, strict=True):
                self._combine(b, j, part, red_out[j])
            return []
        loop(b, lo, hi, self.block, [], step, name="blocks")
        b.ret_void()
        return f

    def _row_ptr(self, b: ir.IRBuilder, p: ir.Value, v: Value, blo: ir.Value) -> ir.Value:
        row = v.type.nbytes // self.rows
        return b.gep(p, [b.mul(blo, i64(row))], source_etype=I8)

    def _call_block(self, b: ir.IRBuilder, blo: ir.Value, hi: ir.Value,
                    slots: ir.Value) -> None:
        full = self.fns[0][0]
        if len(self.fns) == 1:
            b.call(full, [slots])
            return
        whole = b.icmp_signed("<=", b.add(blo, i64(self.block)), hi)
        with b.if_else(whole) as (then, other):
            with then:
                b.call(full, [slots])
            with other:
                b.call(self.fns[1][0], [slots])

    def _combine(self, b: ir.IRBuilder, j: int, part: ir.Value, new: ir.Value) -> None:
        """``part = combine(part, new)`` over the elements of output ``j``."""
        v = self.fn.outputs[j]
        n = max(v.type.size, 1)
        acc = Access(0, 0, (1,), v.dtype)
        k = normalize(combine_kernel((n,), self.out_kind[j], acc, Access(1, 0, (1,), v.dtype)))
        b.call(self.g.mg.kernel(k), [part, new, i64(0), i64(k.domain[0])])

    def _fill(self, j: int, ptr: ir.Value) -> None:
        v = self.fn.outputs[j]
        n = max(v.type.size, 1)
        k = normalize(fill_kernel((n,), Access(0, 0, (1,), v.dtype),
                                  identity(self.out_kind[j], v.dtype)))
        self.g.b.call(self.g.mg.kernel(k), [ptr, i64(0), i64(k.domain[0])])

    # -- the call ------------------------------------------------------------------------
    def emit(self) -> None:
        g, op = self.g, self.op
        rows_fn = self.rows_function()
        params = [g.elem_ptr(g.operand_loc(g.op_index, k, v), v.dtype)
                  for k, v in enumerate(op.operands)]
        outs = [g.elem_ptr(g.loc(r), r.dtype) for r in op.results]
        params += outs + [g.status]
        for j in self.reduced:
            self._fill(j, outs[j])
        threads = min(g.mg.options.threads, -(-self.rows // self.block))
        if threads <= 1 or self._work() < g.mg.options.par_work:
            red = [outs[j] for j in self.reduced]
            g.b.call(rows_fn, params + [g.scratch(self.ws_bytes)] + red
                     + [i64(0), i64(self.rows)])
            return
        slots = [[g.scratch(self.ws_bytes)] + [outs[j] for j in self.reduced]]
        for _ in range(threads - 1):
            parts = [g.scratch(self.fn.outputs[j].type.nbytes) for j in self.reduced]
            for j, p in zip(self.reduced, parts, strict=True):
                self._fill(j, p)
            slots.append([g.scratch(self.ws_bytes)] + parts)
        nblocks = -(-self.rows // self.block)
        step = -(-nblocks // (threads * CHUNKS_PER_THREAD * TILE_CHUNKS)) * self.block
        g._run_chunks(rows_fn, params, slots, step, self.rows, -(-self.rows // step))
        for slot in slots[1:]:
            for j, p in zip(self.reduced, slot[1:], strict=True):
                self._combine(g.b, j, outs[j], p)

    def _work(self) -> float:
        """Element-operations, roughly: the elements of every value of the function."""
        vals = [r for o in self.fn.ops for r in o.results]
        return float(sum(v.type.size for v in vals)) * 4


def emit_tiled_call(g: FnGen, op: Op, fn: Function) -> None:
    """Render ``op``, a ``call`` of tiled function ``fn``."""
    TiledCall(g, op, fn).emit()


__all__ = ["emit_tiled_call", "BlockGen"]
