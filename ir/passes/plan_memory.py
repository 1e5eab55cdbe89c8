"""Memory planning: liveness over the final op order, then buffers shared by values whose
lifetimes do not overlap, with in-place updates where an elementwise op (or kernel) reads
an operand for the last time at the same index it writes its result.

The plan is stored in the function's attributes as plain integers, so the printed IR
stays parseable (``MemoryPlan.of(fn)`` reads it back):

- ``mem_buffers = [n0, n1, ...]``: the byte size of each buffer;
- ``mem_storage = [b, ...]``: one entry per op result, in program order (the order the
  printer numbers them, right after the inputs): the buffer that holds it, or ``-1`` for
  no buffer (a constant, an empty value, or a view of an input or constant);
- views: the result of a ``transpose``, ``slice`` or ``broadcast`` (of anything) and of a
  ``reshape`` of a contiguous value is a view of its operand's memory (permuted, offset
  or zero strides), so it has its operand's buffer; a backend renders it by index
  arithmetic. A function output is never a view (it gets its own buffer, a copy);
- in place: an elementwise op or kernel whose result has the buffer of one of its
  operands overwrites it (each element is read before it is written, at one index); a
  write (``update_slice``, ``scatter``: operand 0 with some elements replaced) whose
  operand 0 dies there writes only the replaced elements into that operand's buffer;
- ``mem_peak_bytes``: the sum of the buffer sizes, what the plan allocates;
- ``mem_total_bytes``: the sum of the sizes of all intermediate and output values, what
  running without a plan would allocate;
- ``mem_live_bytes``: the most bytes of values live at one op (its operands and results
  counted together): what any plan without in-place updates needs at least.

Function outputs get buffers of their own that are never reused (the caller owns them);
inputs and constants get none.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import Function, Op, Value
from ..ops import get_opdef
from .base import Pass, PassContext

# Ops whose result is a view of the operand's memory (strides, offset): a transpose, slice
# or broadcast of anything, a reshape of a contiguous value. The one list: the backends'
# layouts (``yota.backends.layout``) and ``view_safety`` use it too. ``flip`` is not one:
# strides could express it (negative ones), but its result gets a buffer of its own and
# every backend copies it, so nothing downstream (BLAS operands, the same-index rule of
# in-place updates) ever sees negative strides from the plan.
VIEW_OPS = ("reshape", "transpose", "slice", "broadcast")
# Ops whose result is operand 0 with some elements overwritten: in place when it dies.
WRITE_OPS = ("update_slice", "scatter")
ATTRS = ("mem_buffers", "mem_storage", "mem_peak_bytes", "mem_total_bytes", "mem_live_bytes")


@dataclass(frozen=True)
class MemoryPlan:
    buffers: tuple[int, ...]
    storage: tuple[int, ...]
    peak_bytes: int
    total_bytes: int
    live_bytes: int

    def to_attrs(self) -> dict[str, object]:
        return dict(zip(ATTRS, (self.buffers, self.storage, self.peak_bytes,
                                self.total_bytes, self.live_bytes), strict=True))

    @staticmethod
    def of(fn: Function) -> MemoryPlan | None:
        """The plan stored in ``fn``, or None if it has none or it no longer fits."""
        if not all(a in fn.attrs for a in ATTRS):
            return None
        plan = MemoryPlan(*(fn.attrs[a] for a in ATTRS))
        if len(plan.storage) != sum(len(op.results) for op in fn.ops):
            return None
        return plan

    def buffer_of(self, fn: Function) -> dict[Value, int]:
        """Each op result of ``fn`` mapped to its buffer (-1: none)."""
        results = [r for op in fn.ops for r in op.results]
        return dict(zip(results, self.storage, strict=True))


def _in_place_operands(op: Op, callees: dict[str, Function]) -> list[list[int]]:
    """For each result of ``op``, the operand positions it may overwrite: read at the
    same index as the result is written, with the same shape and byte size."""
    opdef = get_opdef(op.name)
    if op.name == "fused":
        return _kernel_in_place(op, callees[op.attrs["callee"]])
    if op.name in WRITE_OPS:  # x with some elements replaced: in place of a dying x
        return [[0]]
    if not opdef.elementwise or op.name == "broadcast":
        return [[] for _ in op.results]
    return [[k for k, v in enumerate(op.operands)
             if v.shape == r.shape and v.type.nbytes == r.type.nbytes] for r in op.results]


def _kernel_in_place(op: Op, body: Function) -> list[list[int]]:
    reduced = {r for o in body.ops if o.name in ("sum", "max", "min") for r in o.results}
    direct = [all(o.name != "broadcast" for o in body.ops if v in o.operands)
              and v.shape == tuple(body.attrs["domain"]) for v in body.inputs]
    out = []
    for r, res in zip(body.outputs, op.results, strict=True):
        ok = r not in reduced
        out.append([k for k, v in enumerate(op.operands) if ok and direct[k]
                    and v.shape == res.shape and v.type.nbytes == res.type.nbytes])
    return out


class _Planner:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.root: dict[Value, Value] = {}  # a reshape's result -> the value it views
        self.same_index: set[Value] = set()  # views that read their root at the same index
        self.needs: set[Value] = set()  # values that get a buffer of their own
        self.end: dict[Value, int] = {}  # root value -> index of its last use
        self.buffers: list[int] = []
        self.where: dict[Value, int] = {}

    def analyse(self) -> None:
        contiguous = set(self.fn.inputs)
        outputs = set(self.fn.outputs)
        for op in self.fn.ops:
            for r in op.results:
                self._classify(op, r, contiguous, outputs)
        for i, op in enumerate(self.fn.ops):
            for r in op.results:
                if r in self.needs:
                    self.end[r] = i
            for v in op.operands:
                self._touch(v, i)
        for v in self.fn.outputs:
            self._touch(v, len(self.fn.ops))

    def _classify(self, op: Op, r: Value, contiguous: set[Value], outputs: set[Value]) -> None:
        """Whether ``r`` views another value's memory (``root``) or needs a buffer."""
        src = op.operands[0] if op.operands else r
        if op.name == "const":
            contiguous.add(r)
        elif op.name in VIEW_OPS and r not in outputs and (
                op.name != "reshape" or src in contiguous):
            self.root[r] = self.root.get(src, src)
            if op.name == "reshape":
                contiguous.add(r)
                if src not in self.root or src in self.same_index:
                    self.same_index.add(r)
        elif r.type.nbytes > 0:
            self.needs.add(r)
            contiguous.add(r)

    def _touch(self, v: Value, i: int) -> None:
        v = self.root.get(v, v)
        if v in self.needs:
            self.end[v] = max(self.end[v], i)

    def allocate(self) -> None:
        free: list[int] = []
        dying: dict[int, list[Value]] = {}
        for v, e in self.end.items():
            dying.setdefault(e, []).append(v)
        for i, op in enumerate(self.fn.ops):
            reuse = _in_place_operands(op, self.fn.callees)
            taken: set[int] = set()
            for r, cands in zip(op.results, reuse, strict=True):
                if r in self.needs:
                    self.where[r] = self._place(r, op, cands, i, free, taken)
            for r in op.results:
                if r in self.root:
                    self.where[r] = self.where.get(self.root[r], -1)
            for v in dying.get(i, []):
                if self.where[v] not in taken and v not in self.fn.outputs:
                    free.append(self.where[v])

    def _place(self, r: Value, op: Op, cands: list[int], i: int, free: list[int],
               taken: set[int]) -> int:
        """In place of a dying operand if allowed; else the smallest free buffer that fits;
        else the largest free one, grown; else a new buffer."""
        size = r.type.nbytes
        for k in cands:
            if op.operands[k] in self.root and op.operands[k] not in self.same_index:
                continue  # a transposed, sliced or broadcast view is not read in step
            v = self.root.get(op.operands[k], op.operands[k])
            b = self.where.get(v)
            if (b is not None and self.end[v] == i and b not in taken
                    and v not in self.fn.outputs and self._sole_view(op, k)):
                taken.add(b)
                return b
        fits = [b for b in free if self.buffers[b] >= size]
        if fits:
            b = min(fits, key=lambda b: self.buffers[b])
        elif free:
            b = max(free, key=lambda b: self.buffers[b])
            self.buffers[b] = size
        else:
            self.buffers.append(size)
            return len(self.buffers) - 1
        free.remove(b)
        return b

    def _sole_view(self, op: Op, k: int) -> bool:
        """No other operand of ``op`` reads operand ``k``'s memory through another view."""
        v = op.operands[k]
        root = self.root.get(v, v)
        return all(w is v or self.root.get(w, w) is not root for w in op.operands)

    def live_bytes(self) -> int:
        delta = [0] * (len(self.fn.ops) + 2)
        start = {r: i for i, op in enumerate(self.fn.ops) for r in op.results}
        for v, e in self.end.items():
            delta[start[v]] += v.type.nbytes
            delta[e + 1] -= v.type.nbytes
        best = live = 0
        for d in delta:
            live += d
            best = max(best, live)
        return best

    def plan(self) -> MemoryPlan:
        self.analyse()
        self.allocate()
        storage = tuple(self.where.get(r, -1) for op in self.fn.ops for r in op.results)
        return MemoryPlan(tuple(self.buffers), storage, sum(self.buffers),
                          sum(v.type.nbytes for v in self.needs), self.live_bytes())


def without_plan(fn: Function) -> Function:
    """``fn`` without a memory plan (after a change that makes it stale)."""
    if not any(a in fn.attrs for a in ATTRS):
        return fn
    return fn.replace(attrs={k: v for k, v in fn.attrs.items() if k not in ATTRS})


def sink_writes(fn: Function) -> Function:
    """``fn`` with each write (``WRITE_OPS``) moved down to just before the first op that
    reads its result: the reads of the version it replaces run first, so that version
    can die at the write and the write can happen in place."""
    if not any(op.name in WRITE_OPS for op in fn.ops):
        return fn
    pending: dict[Value, Op] = {}
    out: list[Op] = []

    def flush(values: tuple[Value, ...]) -> None:
        for v in values:
            w = pending.pop(v, None)
            if w is not None:
                flush(w.operands)
                out.append(w)

    for op in fn.ops:
        if op.name in WRITE_OPS and len(op.results) == 1:
            pending[op.result] = op
        else:
            flush(op.operands)
            out.append(op)
    flush(tuple(pending))
    return fn if out == list(fn.ops) else fn.replace(ops=out)


def plan_memory(fn: Function, ctx: PassContext) -> Function:
    fn = sink_writes(fn)
    plan = _Planner(fn).plan()
    return fn.replace(attrs={**fn.attrs, **plan.to_attrs()})


PLAN_MEMORY = Pass("plan_memory", "assign values to reusable buffers by liveness and "
                   "estimate peak bytes", plan_memory)
