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

import bisect
from collections.abc import Iterator
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
    same index as the result is written, with the same shape and byte size. (Results
    of a kernel may share one list: read it, never change it.)"""
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
    """A kernel's operands read directly (not through a broadcast) over its whole domain,
    listed for each result of the same shape and size that is not a reduction."""
    reduced = {r for o in body.ops if o.name in ("sum", "max", "min") for r in o.results}
    broadcast = {v for o in body.ops if o.name == "broadcast" for v in o.operands}
    domain = tuple(body.attrs["domain"])
    by_type: dict[tuple[tuple[int, ...], int], list[int]] = {}
    for k, (v, inner) in enumerate(zip(op.operands, body.inputs, strict=True)):
        if inner not in broadcast and inner.shape == domain:
            by_type.setdefault((v.shape, v.type.nbytes), []).append(k)
    return [[] if r in reduced else by_type.get((res.shape, res.type.nbytes), [])
            for r, res in zip(body.outputs, op.results, strict=True)]


class _FreeBuffers:
    """The free buffers in order of (size, when freed): the smallest that fits and the
    largest, each the one freed first among equal sizes, found by bisection."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.keys: list[tuple[int, int, int]] = []  # (size, when freed, buffer)
        self.count = 0

    def add(self, b: int) -> None:
        bisect.insort(self.keys, (self.sizes[b], self.count, b))
        self.count += 1

    def take_fit(self, size: int) -> int | None:
        """The smallest free buffer of at least ``size`` bytes, taken (None: none)."""
        i = bisect.bisect_left(self.keys, (size, -1, -1))
        return self.keys.pop(i)[2] if i < len(self.keys) else None

    def take_largest(self) -> int | None:
        """The largest free buffer, taken (None: none)."""
        if not self.keys:
            return None
        return self.keys.pop(bisect.bisect_left(self.keys, (self.keys[-1][0], -1, -1)))[2]


def _first_spare(cands: list[int], spare: dict[int, int], taken: set[int],
                 seen: dict[int, int]) -> int | None:
    """The buffer of the first operand in ``cands`` that is ``spare`` and whose buffer no
    result of the op took yet (then taken). An operand passed over once stays unusable
    for the op, so a list shared by several results is read once in all (``seen``)."""
    j = seen.get(id(cands), 0)
    while j < len(cands):
        b = spare.get(cands[j])
        j += 1
        if b is not None and b not in taken:
            taken.add(b)
            seen[id(cands)] = j
            return b
    seen[id(cands)] = j
    return None


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
        free = _FreeBuffers(self.buffers)
        outputs = set(self.fn.outputs)
        dying: dict[int, list[Value]] = {}
        for v, e in self.end.items():
            dying.setdefault(e, []).append(v)
        for i, op in enumerate(self.fn.ops):
            reuse = _in_place_operands(op, self.fn.callees)
            spare = self._spare(op, i, outputs) if any(reuse) else {}
            seen: dict[int, int] = {}  # candidate list -> how far it was read
            taken: set[int] = set()
            for r, cands in zip(op.results, reuse, strict=True):
                if r in self.needs:
                    b = _first_spare(cands, spare, taken, seen)
                    self.where[r] = self._fresh(r, free) if b is None else b
            for r in op.results:
                if r in self.root:
                    self.where[r] = self.where.get(self.root[r], -1)
            for v in dying.get(i, []):
                if self.where[v] not in taken and v not in outputs:
                    free.add(self.where[v])

    def _spare(self, op: Op, i: int, outputs: set[Value]) -> dict[int, int]:
        """The operands op ``i`` may overwrite, by position, with their buffers: read in
        step (not through a transpose, slice or broadcast), dying here, not outputs, and
        read by no other operand through another view."""
        views: dict[Value, set[Value]] = {}
        for w in op.operands:
            views.setdefault(self.root.get(w, w), set()).add(w)
        out: dict[int, int] = {}
        for k, w in enumerate(op.operands):
            if w in self.root and w not in self.same_index:
                continue  # a transposed, sliced or broadcast view is not read in step
            v = self.root.get(w, w)
            b = self.where.get(v)
            if b is not None and self.end[v] == i and v not in outputs and len(views[v]) == 1:
                out[k] = b
        return out

    def _fresh(self, r: Value, free: _FreeBuffers) -> int:
        """The smallest free buffer that fits; else the largest free one, grown; else a
        new buffer."""
        size = r.type.nbytes
        b = free.take_fit(size)
        if b is None:
            b = free.take_largest()
            if b is None:
                self.buffers.append(size)
                return len(self.buffers) - 1
            self.buffers[b] = size
        return b

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
        """The pending writes ``values`` need (operands first), onto ``out``: a search
        with a stack of its own (a chain of writes can be any length)."""
        stack: list[tuple[Op | None, Iterator[Value]]] = [(None, iter(values))]
        while stack:
            w, todo = stack[-1]
            for v in todo:
                nxt = pending.pop(v, None)
                if nxt is not None:
                    stack.append((nxt, iter(nxt.operands)))
                    break
            else:
                stack.pop()
                if w is not None:
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
