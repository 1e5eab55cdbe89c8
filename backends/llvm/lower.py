"""Lowering IR functions into ONE LLVM module.

Every IR function becomes ``i32 @yota.fn.NAME(ptr args)`` where ``args`` points to the
pointers of its inputs, then its outputs, then its workspace and a status block; it
returns 0, or 1 + the number of the failure record (a guard that does not hold, an
index out of range) it stopped at, having written the offending value to the status
block. The top-level function gets exported wrappers (``module.py``).

The emitters (``backends/emit.py`` and ``emit.py``) render one op each, from the
locations the layout decided; this module holds what the LLVM ones share beyond
``backends/lowering.py``: the module under construction, pointers, kernel launches
(single-threaded, or split over threads for large kernels) and failure exits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import llvmlite.ir as ir
import numpy as np
from yota.ir.core import Function, Op

from ..kernel import Access, Kernel, combine_kernel, fill_kernel, identity, normalize, rebase
from ..layout import Loc
from ..lowering import Emitter, FnLowering, KernelArgs
from .abi import PAR_WORK, POOL_SYMBOL  # PAR_WORK: kernel work above which one is split
from .kernel import build, work
from .layout import build_layout
from .runtime.target import Target
from .types import I8, I32, I64, PTR, VOID, declare, i64, mem_type

# The most code of one LLVM function (FnGen's segments), counted as its ops' sizes: one
# for the op and one for each operand and result (a kernel launch passes one pointer per
# operand and result); a copy into an output array counts COPY_SIZE.
SEGMENT_SIZE = 1024
COPY_SIZE = 3
PAR_ALIGN = 64  # chunk boundaries of a split 1-D kernel are multiples of this
CHUNKS_PER_THREAD = 4  # chunks are claimed dynamically: a busy core gets fewer


@dataclass
class Options:
    threads: int = 1
    par_work: float = PAR_WORK
    profile: bool = False  # the profiled variant: each step of the top function timed
    packed: bool | None = None  # entries take one array of pointers (None: abi.packed)


PROFILED_FN = "yota.main"  # the function whose steps a profiled variant times


@dataclass
class ModuleGen:
    """The module being built, shared by the functions lowered into it."""

    target: Target
    options: Options
    emitters: Mapping[str, Emitter]
    module: ir.Module = field(default_factory=lambda: ir.Module(name="yota"))
    failures: list[dict[str, Any]] = field(default_factory=list)
    functions: dict[str, tuple[ir.Function, int]] = field(default_factory=dict)
    kernels: dict[str, ir.Function] = field(default_factory=dict)
    runners: dict[str, ir.Function] = field(default_factory=dict)
    counter: int = 0
    # a profiled variant: the op index of each timed step (-1: the output copies), and
    # the workspace offset of its timestamps (two i64 per step: start and end, in ns)
    profile_steps: list[int] = field(default_factory=list)
    profile_offset: int = 0
    # a loop body's name -> the lengths of the loops it runs in, outermost first
    loops: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.module.triple = self.target.triple

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}.{self.counter}"

    def kernel(self, k: Kernel) -> ir.Function:
        """The function for kernel ``k``; equal kernels (a loop body repeated by
        unrolling, say) share one, since pointers are parameters."""
        key = repr(k)
        if key not in self.kernels:
            self.kernels[key] = build(k, self.module, self.target, self.fresh("yota.kernel"))
        return self.kernels[key]

    def chunk_runner(self, kfn: ir.Function, nparams: int, nextra: int,
                     per_chunk: bool = False) -> ir.Function:
        """``chunks(ctx, slot)``: run ``kfn`` on chunks until none is left (one per
        kernel); its ``nextra`` extra pointers are the slot's, or ``per_chunk`` the
        chunk's."""
        key = f"{kfn.name}/{nparams}/{nextra}/{int(per_chunk)}"
        if key not in self.runners:
            self.runners[key] = _chunk_runner(self, kfn, nparams, nextra, per_chunk)
        return self.runners[key]

    def function(self, fn: Function) -> tuple[ir.Function, int]:
        """The LLVM function of IR function ``fn`` and its workspace size in bytes."""
        if fn.name not in self.functions:
            self.functions[fn.name] = FnGen(self, fn, f"yota.fn.{fn.name}").run()
        return self.functions[fn.name]

    def failure(self, record: dict[str, Any]) -> int:
        self.failures.append(record)
        return len(self.failures)


# The context of a split kernel, i64 words on the caller's stack: next chunk to claim,
# number of chunks, chunk size, extent of axis 0; the kernel's pointer parameters; then
# each slot's extra pointers, or each chunk's (a split kernel's partial reductions: per
# chunk, so that the sums do not depend on which thread took which chunk; combined in
# chunk order, a split reduction gives the same bits in every run).
CTX_HEAD = 4


def _chunk_runner(mg: ModuleGen, kfn: ir.Function, nparams: int, nextra: int,
                  per_chunk: bool) -> ir.Function:
    chunks = ir.Function(mg.module, ir.FunctionType(VOID, [PTR, I64]), mg.fresh("yota.chunks"))
    chunks.linkage = "internal"
    b = ir.IRBuilder(chunks.append_basic_block("entry"))
    ctx, slot = chunks.args

    def word(j: ir.Value | int) -> ir.Value:
        return b.load(b.gep(ctx, [i64(j) if isinstance(j, int) else j], source_etype=I64),
                      typ=I64)
    ps = [b.inttoptr(word(CTX_HEAD + j), PTR) for j in range(nparams)]
    n, step, d0 = word(1), word(2), word(3)
    claim = chunks.append_basic_block("claim")
    work = chunks.append_basic_block("work")
    end = chunks.append_basic_block("done")
    b.branch(claim)
    b.position_at_end(claim)
    c = b.atomic_rmw("add", ctx, i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, n), work, end)
    b.position_at_end(work)
    first = b.add(i64(CTX_HEAD + nparams), b.mul(c if per_chunk else slot, i64(nextra)))
    parts = [b.inttoptr(word(b.add(first, i64(r))), PTR) for r in range(nextra)]
    lo = b.mul(c, step)
    hi = b.add(lo, step)
    b.call(kfn, ps + parts + [lo, b.select(b.icmp_signed("<", hi, d0), hi, d0)])
    b.branch(claim)
    b.position_at_end(end)
    b.ret_void()
    return chunks


class FnGen(FnLowering):
    """The lowering of one IR function to an LLVM function.

    A function of more than ``segment_size`` (its ops and their operands and results,
    copies into its output arrays: ``op_size``) becomes a driver that calls segments in
    turn, each an LLVM function (``NAME.sK``, not inlined) holding the next ops up to
    that size and returning their status: LLVM's code generator takes more than linear
    time in the length of one function, which stays bounded this way. A segment loads
    the argument pointers it uses in its entry block, when first used."""

    segment_size: int | None = SEGMENT_SIZE

    def __init__(self, mg: ModuleGen, fn: Function, name: str) -> None:
        super().__init__(fn, build_layout(fn, mg.target.blas), mg.emitters)
        self.mg = mg
        self.llfn = ir.Function(mg.module, ir.FunctionType(I32, [PTR]), name)
        self.llfn.linkage = "internal"
        self.timer: StepTimer | None = None
        profiled = mg.options.profile and name == PROFILED_FN
        limit = self.segment_size
        size = sum(map(op_size, fn.ops)) + COPY_SIZE * len(self.lay.out_copies)
        self.segments = None if profiled or limit is None or size <= limit \
            else Segments(self, limit)
        if self.segments is not None:
            self.segments.open()
            return
        self.top = self.llfn.append_basic_block("entry")
        body = self.llfn.append_basic_block("body")
        self.ab = ir.IRBuilder(self.top)  # allocas and argument loads
        self.b = ir.IRBuilder(body)
        self._load_args()
        if profiled:
            self.timer = StepTimer(self)

    # -- set-up ---------------------------------------------------------------------
    def _load_args(self) -> None:
        fn, ab = self.fn, self.ab
        n = len(fn.inputs) + len(fn.outputs)
        slot = [ab.load(ab.gep(self.llfn.args[0], [i64(k)], source_etype=PTR), typ=PTR)
                for k in range(n + 2)]
        self.ws, self.status = slot[n], slot[n + 1]
        self.bases: Any = []
        for k in range(len(self.lay.storages)):
            self.bases.append(self.base(k, lambda j: slot[j]))

    def base(self, k: int, slot: Any) -> ir.Value:
        """The base pointer of storage ``k`` (``slot(j)``: argument pointer ``j``)."""
        st = self.lay.storages[k]
        if st.kind == "in":
            return slot(st.index)
        if st.kind == "out":
            return slot(len(self.fn.inputs) + st.index)
        if st.kind == "ws":
            return self.ab.gep(self.ws, [i64(st.index)], source_etype=I8)
        return self._global(self.lay.consts[st.index], k)

    def _global(self, data: np.ndarray, k: int) -> ir.GlobalVariable:
        raw = bytearray(np.ascontiguousarray(data).tobytes())
        ty = ir.ArrayType(I8, len(raw))
        g = ir.GlobalVariable(self.mg.module, ty, name=f"{self.llfn.name}.const{k}")
        g.global_constant = True
        g.linkage = "private"
        g.align = 64
        g.initializer = ir.Constant(ty, raw)
        return g

    def run(self) -> tuple[ir.Function, int]:
        self.emit_ops()
        self.b.ret(ir.Constant(I32, 0))
        self.ab.branch(self.b.function.blocks[1])
        if self.segments is not None:
            self.segments.finish()
        ws = self.lay.ws_bytes + self.scratch_max
        return self.llfn, ws if self.timer is None else self.timer.finish(ws)

    def step(self, op_index: int) -> contextlib.AbstractContextManager[Any]:
        if self.segments is not None:
            self.segments.count(op_size(self.fn.ops[op_index]) if op_index >= 0 else 1)
            self.segments.copies_count = op_index < 0  # the copies into output arrays
        return contextlib.nullcontext() if self.timer is None else self.timer.step(op_index)

    def copy(self, shape: tuple[int, ...], src: Loc, dtype: np.dtype, dst: Loc) -> None:
        if self.segments is not None and self.segments.copies_count:
            self.segments.count(COPY_SIZE)  # one output's copy: a step of its own
        super().copy(shape, src, dtype, dst)

    # -- pointers -------------------------------------------------------------------------
    def elem_ptr(self, loc: Loc, dtype: np.dtype, extra: ir.Value | int = 0) -> ir.Value:
        """Pointer to element ``loc.offset + extra`` of ``loc``'s storage."""
        if loc.storage < 0:
            return ir.Constant(PTR, None)
        off: ir.Value = i64(loc.offset)
        if not (isinstance(extra, int) and extra == 0):
            off = self.b.add(off, i64(extra) if isinstance(extra, int) else extra)
        return self.b.gep(self.bases[loc.storage], [off], source_etype=mem_type(dtype))

    def scratch(self, nbytes: int) -> ir.Value:
        """Workspace bytes that live only while the current op runs."""
        return self.b.gep(self.ws, [i64(self.scratch_offset(nbytes))], source_etype=I8)

    def pointers(self, args: KernelArgs) -> list[ir.Value]:
        """The kernel arguments: each storage's base pointer."""
        return [self.bases[s] if s >= 0 else ir.Constant(PTR, None) for s in args.storages]

    # -- kernels -------------------------------------------------------------------------
    def launch(self, k: Kernel, args: KernelArgs) -> None:
        """Initialize reduction outputs, run the kernel (split over threads when it is
        large), and combine the threads' partial reductions."""
        k = normalize(k)
        if not k.reductions and any(d == 0 for d in k.domain):
            return
        k, low = rebase(k)
        params = [p if not low.get(j) else self.b.gep(p, [i64(low[j])], source_etype=I8)
                  for j, p in enumerate(self.pointers(args))]
        for kind, _, acc in k.reductions:
            self._fill_reduction(k, kind, acc, params[acc.param])
        if any(d == 0 for d in k.domain):
            return
        threads = self.mg.options.threads
        if threads > 1 and work(k) >= self.mg.options.par_work and k.domain[0] > 1:
            self._parallel(k, params, threads)
        else:
            kfn = self.mg.kernel(k)
            self.b.call(kfn, list(params) + [i64(0), i64(k.domain[0])])

    def _fill_reduction(self, k: Kernel, kind: str, acc: Access, ptr: ir.Value) -> None:
        kept = [a for a, r in enumerate(k.reduce) if not r]
        shape = tuple(k.domain[a] for a in kept)
        dst = Access(0, acc.offset, tuple(acc.strides[a] for a in kept), acc.dtype)
        fk = normalize(fill_kernel(shape, dst, identity(kind, acc.dtype)))
        if all(d > 0 for d in fk.domain):
            self.b.call(self.mg.kernel(fk), [ptr, i64(0), i64(fk.domain[0])])

    def _parallel(self, k: Kernel, params: list[ir.Value], threads: int) -> None:
        """Split axis 0 into chunks that this thread and ``threads - 1`` helpers claim
        one at a time; reductions over axis 0 go to one partial buffer per thread."""
        d0 = k.domain[0]
        align = PAR_ALIGN if len(k.domain) == 1 else 1
        step = -(-d0 // (threads * CHUNKS_PER_THREAD))
        step = -(-step // align) * align
        nchunks = -(-d0 // step)
        private = k.reduce[0] and bool(k.reductions)
        k2 = k
        slots: list[list[ir.Value]] = [[] for _ in range(nchunks)]
        if private:  # each reduction's output becomes a new parameter, one per chunk
            n = k.nparams
            k2 = replace(k, reductions=[(kind, vid, replace(acc, param=n + j)) for j, (kind, vid, acc)
                                        in enumerate(k.reductions)])
            slots = [[params[acc.param] for _, _, acc in k.reductions]]
            slots += [[self._partial(k, kind, acc) for kind, _, acc in k.reductions]
                      for _ in range(nchunks - 1)]
        self._run_chunks(self.mg.kernel(k2), params, slots, step, d0, nchunks, threads, True)
        for part in slots[1:] if private else []:
            for (kind, _, acc), p in zip(k.reductions, part, strict=True):
                self._combine_partial(k, kind, acc, params[acc.param], p)

    def _partial(self, k: Kernel, kind: str, acc: Access) -> ir.Value:
        kept = [a for a, r in enumerate(k.reduce) if not r]
        span = acc.offset + sum((k.domain[a] - 1) * abs(acc.strides[a]) for a in kept) + 1
        ptr = self.scratch(span * acc.dtype.itemsize)
        self._fill_reduction(k, kind, acc, ptr)
        return ptr

    def _combine_partial(self, k: Kernel, kind: str, acc: Access, out: ir.Value,
                         part: ir.Value) -> None:
        kept = [a for a, r in enumerate(k.reduce) if not r]
        shape = tuple(k.domain[a] for a in kept)
        st = tuple(acc.strides[a] for a in kept)
        ck = normalize(combine_kernel(shape, kind, Access(0, acc.offset, st, acc.dtype),
                                      Access(1, acc.offset, st, acc.dtype)))
        self.b.call(self.mg.kernel(ck), [out, part, i64(0), i64(ck.domain[0])])

    def _run_chunks(self, kfn: ir.Function, params: list[ir.Value],
                    slots: list[list[ir.Value]], step: int, d0: int, nchunks: int,
                    threads: int | None = None, per_chunk: bool = False) -> None:
        """Run ``kfn`` over chunks of axis 0 that this thread and up to ``threads - 1``
        (default: one per slot) of the pool's helpers (``runtime/pool.py``) claim one at a
        time; ``slots``: each slot's extra pointers, or ``per_chunk`` each chunk's.
        Returns when all are done."""
        b, ab = self.b, self.ab
        nextra = len(slots[0])
        chunks = self.mg.chunk_runner(kfn, len(params), nextra, per_chunk)
        par = declare(self.mg.module, POOL_SYMBOL, VOID, [PTR, PTR, I64])
        vals = [i64(v) for v in (0, nchunks, step, d0)] + [b.ptrtoint(p, I64) for p in params]
        vals += [b.ptrtoint(p, I64) for slot in slots for p in slot]
        ctx = ab.alloca(ir.ArrayType(I64, len(vals)))
        for j, v in enumerate(vals):
            b.store(v, b.gep(ctx, [i64(0), i64(j)], inbounds=True))
        b.call(par, [chunks, ctx, i64(len(slots) if threads is None else threads)])

    # -- failures -------------------------------------------------------------------------
    def fail_if(self, cond: ir.Value, record: dict[str, Any], value: ir.Value) -> None:
        """If ``cond``, write ``value`` to the status block and return the failure code."""
        loops = self.mg.loops.get(self.fn.name)
        code = self.mg.failure({**record, "loops": loops} if loops else record)
        with self.b.if_then(cond, likely=False):
            self.b.store(value, self.b.gep(self.status, [i64(8)], source_etype=I8))
            self.b.ret(ir.Constant(I32, code))


def op_size(op: Op) -> int:
    """An op's share of a segment: one, and one for each operand and result."""
    return 1 + len(op.operands) + len(op.results)


class Segments:
    """The segments of a long function (``FnGen``): ``open`` starts the next one (a new
    LLVM function, called from the driver, which returns the segment's status if it is
    not 0); ``count`` starts one where the next op would take the current one past
    ``limit``; ``finish`` ends the driver."""

    def __init__(self, g: FnGen, limit: int) -> None:
        self.g, self.limit = g, limit
        self.driver = ir.IRBuilder(g.llfn.append_basic_block("entry"))
        self.n = 0  # segments so far
        self.size = 0  # of the current one
        self.consts: dict[int, ir.Value] = {}  # one global per constant, for all segments
        self.copies_count = False  # each copy into an output array counts
    def open(self) -> None:
        g = self.g
        f = ir.Function(g.mg.module, g.llfn.function_type, f"{g.llfn.name}.s{self.n}")
        f.linkage = "internal"
        f.attributes.add("noinline")  # (a function called once would be inlined)
        self.n += 1
        self.size = 0
        g.top = f.append_basic_block("entry")
        g.ab = ir.IRBuilder(g.top)
        g.b = ir.IRBuilder(f.append_basic_block("body"))
        n = len(g.fn.inputs) + len(g.fn.outputs)
        g.ws, g.status = self._slot(n), self._slot(n + 1)
        g.bases = LazyBases(self)
        rc = self.driver.call(f, [g.llfn.args[0]])
        with self.driver.if_then(self.driver.icmp_signed("!=", rc, ir.Constant(I32, 0)),
                                 likely=False):
            self.driver.ret(rc)

    def _slot(self, j: int) -> ir.Value:
        ab = self.g.ab
        return ab.load(ab.gep(ab.function.args[0], [i64(j)], source_etype=PTR), typ=PTR)

    def base(self, k: int) -> ir.Value:
        """Storage ``k``'s base pointer, computed in the current segment's entry."""
        if self.g.lay.storages[k].kind == "const":
            if k not in self.consts:
                self.consts[k] = self.g.base(k, self._slot)
            return self.consts[k]
        return self.g.base(k, self._slot)

    def count(self, size: int) -> None:
        """Before an op (or a copy) of ``size``: a new segment if the current one would
        pass ``limit`` (one that holds nothing yet takes it whatever its size)."""
        if self.size and self.size + size > self.limit:
            g = self.g
            g.b.ret(ir.Constant(I32, 0))
            g.ab.branch(g.b.function.blocks[1])
            self.open()
        self.size += size

    def finish(self) -> None:
        self.driver.ret(ir.Constant(I32, 0))


class LazyBases:
    """A segment's base pointers (``FnGen.bases``), each made when first used."""

    def __init__(self, segs: Segments) -> None:
        self.segs = segs
        self.made: dict[int, ir.Value] = {}
        self.n = len(segs.g.lay.storages)

    def __getitem__(self, k: int) -> ir.Value:
        if k not in self.made:
            self.made[k] = self.segs.base(k)
        return self.made[k]

    def __len__(self) -> int:
        return self.n

    def append(self, v: ir.Value) -> None:
        """A base pointer made by an emitter (a storage it added: scratch)."""
        self.made[self.n] = v
        self.n += 1


class StepTimer:
    """The timing of a profiled variant's steps: ``clock_gettime(CLOCK_MONOTONIC)`` read
    before and after the code of each op that emits any, both written to the step's two
    words of the timestamp area at the end of the workspace (whose offset, known only
    once every op is emitted, is a constant global filled in by ``finish``)."""

    CLOCK_MONOTONIC = 1

    def __init__(self, g: FnGen) -> None:
        self.g = g
        module = g.mg.module
        self.clock = declare(module, "clock_gettime", I32, [I32, PTR])
        ts_type = ir.ArrayType(I64, 2)
        self.ts = g.ab.alloca(ts_type)
        self.offset = ir.GlobalVariable(module, I64, name="yota.profile.offset")
        self.offset.global_constant = True
        self.offset.linkage = "private"
        self.events = g.ab.gep(g.ws, [g.ab.load(self.offset, typ=I64)], source_etype=I8)

    def now(self) -> ir.Value:
        b = self.g.b
        b.call(self.clock, [ir.Constant(I32, self.CLOCK_MONOTONIC), self.ts])
        sec = b.load(b.gep(self.ts, [i64(0), i64(0)], inbounds=True), typ=I64)
        nsec = b.load(b.gep(self.ts, [i64(0), i64(1)], inbounds=True), typ=I64)
        return b.add(b.mul(sec, i64(1_000_000_000)), nsec)

    def record(self, word: int, value: ir.Value) -> None:
        b = self.g.b
        b.store(value, b.gep(self.events, [i64(8 * word)], source_etype=I8))

    @contextlib.contextmanager
    def step(self, op_index: int) -> Iterator[None]:
        b = self.g.b
        block, n0 = b.block, len(b.block.instructions)
        start = self.now()
        n1 = len(block.instructions)
        yield
        if b.block is block and len(block.instructions) == n1:  # no code: no step
            del block.instructions[n0:]
            return
        steps = self.g.mg.profile_steps
        self.record(2 * len(steps), start)
        self.record(2 * len(steps) + 1, self.now())
        steps.append(op_index)

    def finish(self, ws_bytes: int) -> int:
        """The workspace size with the timestamp area after ``ws_bytes``."""
        off = -(-ws_bytes // 64) * 64
        self.offset.initializer = i64(off)
        self.g.mg.profile_offset = off
        return off + 16 * len(self.g.mg.profile_steps)
