"""A ``call`` of a row-tiled function (``yota.ir.passes.tile``: attributes ``row_count``
and ``row_block``) run block by block of rows.

The function over ``row_block`` rows (and over the ``row_count % row_block`` left at the
end, if any) is lowered as an ordinary function whose kernels stay on one thread; a
*rows* function ``rows(in..., out..., status, ws, part..., lo, hi)`` calls it for each
block of rows in ``[lo, hi)``, with pointers to the block's rows for inputs and results
by rows, the inputs read whole as they are, and its own workspace ``ws`` (so the values
the block's ops pass each other stay in cache). A result reduced over the rows (a column
sum) goes to ``part``, the chunk's running result: the block function's kernels add
the block's rows to it (``BlockGen``), or, where its layout computes that output
elsewhere and copies it, the block's result is combined into ``part`` after the block.

Chunks of whole blocks are claimed by this thread and the pool's helpers
(``runtime/pool.py``, as a split kernel's chunks are); each thread has its own workspace, each chunk its own
partial results, combined into the outputs in chunk order at the end (so the sums are
the same in every run, whichever thread took which chunk).
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
    are what is split over threads). The outputs numbered in ``accumulate`` (results
    reduced over the rows) are not filled with the identity first: their kernels add
    the block's rows to what the output holds, the chunk's running partial result. That
    holds only where the output's memory is the output array and nothing else
    (``accumulated``: not an output the layout computes elsewhere and copies, nor one
    whose array the memory plan lends to another value first)."""

    segment_size = None  # a block function is a few ops: one LLVM function

    def __init__(self, mg: Any, fn: Function, name: str, accumulate: set[int]) -> None:
        super().__init__(mg, fn, name)
        copied = {j for j, _ in self.lay.out_copies}
        self.accumulated: set[int] = set()
        self.keep: set[int] = set()  # ids of the base pointers of accumulated outputs
        for j in sorted(accumulate - copied):
            s = self.lay.loc[fn.outputs[j]].storage
            if s >= 0 and all(loc.storage != s or v is fn.outputs[j]
                              for v, loc in self.lay.loc.items()):
                self.accumulated.add(j)
                self.keep.add(id(self.bases[s]))

    def _parallel(self, k: Any, params: list[ir.Value], threads: int) -> None:
        self.b.call(self.mg.kernel(k), list(params) + [i64(0), i64(k.domain[0])])

    def _fill_reduction(self, k: Any, kind: str, acc: Access, ptr: ir.Value) -> None:
        if id(ptr) not in self.keep:  # an accumulated output keeps its running value
            super()._fill_reduction(k, kind, acc, ptr)


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
        sizes = [self.block] + ([self.rows % self.block] if self.rows % self.block else [])
        gens = [self._block_gen(n, set(self.reduced)) for n in sizes]
        self.acc_sets = [gen.accumulated for gen in gens]  # per block size
        self.fns = [gen.run() for gen in gens]
        # a thread's workspace: the block function's, then the block's reduced results
        self.outs_at: list[int] = []
        off = _align(max(ws for _, ws in self.fns))
        for j in self.reduced:
            self.outs_at.append(off)
            off += _align(fn.outputs[j].type.nbytes)
        self.ws_bytes = off

    def _block_gen(self, n: int, accumulate: set[int]) -> BlockGen:
        mg = self.g.mg
        bf = block_function(self.fn, n, mg.fresh(f"{self.fn.name}.rows{n}"))
        return BlockGen(mg, bf, f"yota.fn.{bf.name}", accumulate)

    # -- the rows function ---------------------------------------------------------------
    def rows_function(self, chunk: int) -> ir.Function:
        """``rows(in..., out..., status, part..., ws, lo, hi)``: the blocks of rows
        ``[lo, hi)``; a result reduced over the rows goes to the partial result of the
        chunk ``lo // chunk``, array ``lo // chunk`` of ``part`` (whole outputs' sizes)."""
        fn, mg = self.fn, self.g.mg
        nin, nout, nred = len(fn.inputs), len(fn.outputs), len(self.reduced)
        fty = ir.FunctionType(VOID, [PTR] * (nin + nout + 2 + nred) + [I64, I64])
        f = ir.Function(mg.module, fty, mg.fresh("yota.rows"))
        f.linkage = "internal"
        f.attributes.add("nounwind")
        args = list(f.args)
        ins, outs = args[:nin], args[nin:nin + nout]
        status, bases = args[nin + nout], args[nin + nout + 1:nin + nout + 1 + nred]
        ws, (lo, hi) = args[nin + nout + 1 + nred], args[-2:]
        b = ir.IRBuilder(f.append_basic_block("entry"))
        slots = b.alloca(ir.ArrayType(PTR, nin + nout + 2))
        red_out = {j: b.gep(ws, [i64(at)], source_etype=I8)
                   for j, at in zip(self.reduced, self.outs_at, strict=True)}

        def put(k: int, p: ir.Value) -> None:
            b.store(p, b.gep(slots, [i64(0), i64(k)], inbounds=True))

        c = b.sdiv(lo, i64(chunk))
        part = {j: b.gep(p, [b.mul(c, i64(fn.outputs[j].type.nbytes))], source_etype=I8)
                for j, p in zip(self.reduced, bases, strict=True)}

        def run(which: int, blo: ir.Value) -> None:
            """Block function ``which`` (0: full blocks, 1: the short last one)."""
            acc = self.acc_sets[which]
            for j, (v, p) in enumerate(zip(fn.outputs, outs, strict=True)):
                put(nin + j, part[j] if j in acc else red_out[j] if j in red_out
                    else self._row_ptr(b, p, v, blo))
            b.call(self.fns[which][0], [slots])
            for j in self.reduced:
                if j not in acc:
                    self._combine(b, j, part[j], red_out[j])

        def step(blo: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            for k, (v, p) in enumerate(zip(fn.inputs, ins, strict=True)):
                put(k, self._row_ptr(b, p, v, blo) if self.in_rows[k] else p)
            put(nin + nout, ws)
            put(nin + nout + 1, status)
            if len(self.fns) == 1:
                run(0, blo)
                return []
            with b.if_else(b.icmp_signed("<=", b.add(blo, i64(self.block)), hi)) as (
                    then, other):
                with then:
                    run(0, blo)
                with other:
                    run(1, blo)
            return []
        loop(b, lo, hi, self.block, [], step, name="blocks")
        b.ret_void()
        return f

    def _row_ptr(self, b: ir.IRBuilder, p: ir.Value, v: Value, blo: ir.Value) -> ir.Value:
        row = v.type.nbytes // self.rows
        return b.gep(p, [b.mul(blo, i64(row))], source_etype=I8)

    def _combine(self, b: ir.IRBuilder, j: int, part: ir.Value, new: ir.Value) -> None:
        """``part = combine(part, new)`` over the elements of output ``j``."""
        v = self.fn.outputs[j]
        n = max(v.type.size, 1)
        acc = Access(0, 0, (1,), v.dtype)
        k = normalize(combine_kernel((n,), self.out_kind[j], acc, Access(1, 0, (1,), v.dtype)))
        b.call(self.g.mg.kernel(k), [part, new, i64(0), i64(k.domain[0])])

    def _fill(self, j: int, ptr: ir.Value, copies: int) -> None:
        """Fill ``copies`` consecutive arrays shaped as output ``j`` with the identity."""
        v = self.fn.outputs[j]
        n = max(v.type.size, 1) * copies
        k = normalize(fill_kernel((n,), Access(0, 0, (1,), v.dtype),
                                  identity(self.out_kind[j], v.dtype)))
        self.g.b.call(self.g.mg.kernel(k), [ptr, i64(0), i64(k.domain[0])])

    # -- the call ------------------------------------------------------------------------
    def emit(self) -> None:
        g, op = self.g, self.op
        params = [g.elem_ptr(g.operand_loc(g.op_index, k, v), v.dtype)
                  for k, v in enumerate(op.operands)]
        outs = [g.elem_ptr(g.loc(r), r.dtype) for r in op.results]
        params += outs + [g.status]
        for j in self.reduced:
            self._fill(j, outs[j], 1)
        threads = min(g.mg.options.threads, -(-self.rows // self.block))
        if threads <= 1 or self._work() < g.mg.options.par_work:
            rows_fn = self.rows_function(self.rows)
            g.b.call(rows_fn, params + [outs[j] for j in self.reduced]
                     + [g.scratch(self.ws_bytes), i64(0), i64(self.rows)])
            return
        nblocks = -(-self.rows // self.block)
        step = -(-nblocks // (threads * CHUNKS_PER_THREAD * TILE_CHUNKS)) * self.block
        nchunks = -(-self.rows // step)
        # each chunk's partial results, combined in chunk order: the same bits in every
        # run, whichever thread took which chunk
        parts = [g.scratch(nchunks * self.fn.outputs[j].type.nbytes) for j in self.reduced]
        for j, p in zip(self.reduced, parts, strict=True):
            self._fill(j, p, nchunks)
        slots = [[g.scratch(self.ws_bytes)] for _ in range(threads)]
        g._run_chunks(self.rows_function(step), params + parts, slots, step, self.rows,
                      nchunks)
        for j, p in zip(self.reduced, parts, strict=True):
            nbytes = self.fn.outputs[j].type.nbytes

            def add(ci: ir.Value, _: list[ir.Value], j: int = j, p: ir.Value = p,
                    nbytes: int = nbytes) -> list[ir.Value]:
                chunk = g.b.gep(p, [g.b.mul(ci, i64(nbytes))], source_etype=I8)
                self._combine(g.b, j, outs[j], chunk)
                return []
            loop(g.b, 0, nchunks, 1, [], add, name="parts")

    def _work(self) -> float:
        """Element-operations, roughly: the elements of every value of the function."""
        vals = [r for o in self.fn.ops for r in o.results]
        return float(sum(v.type.size for v in vals)) * 4


def emit_tiled_call(g: FnGen, op: Op, fn: Function) -> None:
    """Render ``op``, a ``call`` of tiled function ``fn``."""
    TiledCall(g, op, fn).emit()


__all__ = ["emit_tiled_call", "BlockGen"]
