"""Where every value of a planned function lives: the memory plan rendered as storages
and views, for every target.

The memory plan (``yota.ir.passes.plan_memory``) assigns each op result a buffer. Here
each value gets a *location* (``Loc``): a storage (an input array, an output array, a
region of the call's workspace, a constant) with an element offset and element strides.

- A result the plan put in its operand's buffer (one of ``VIEW_OPS``: a ``transpose``,
  ``slice`` or ``broadcast``, or a ``reshape`` of a contiguous value) may be a *view*:
  its location is the operand's, with other strides, and no code runs for it. Which of
  those the target keeps as views is its ``LayoutBuilder.view`` (``llvm/layout.py``,
  ``cuda/layout.py``).
- A shape op (``SHAPE_OPS``: those and ``flip``, whose result the plan gives a buffer of
  its own) that is not a view is *materialized*: copied into the buffer the plan gave
  it, or a region of its own (``materialize``).
- An operand an op cannot read where it is (a ``call``'s strided operand; a target adds
  its own rules, ``LayoutBuilder.operand_copies``) gets a contiguous copy in a region of
  its own, made right before the op (``copies``).
- An output whose buffer holds nothing bigger is written straight into the caller's
  output array; other outputs are copied there at the end (``out_copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.ops.misc import splat_scalar
from yota.ir.passes import PassContext
from yota.ir.passes.plan_memory import VIEW_OPS, MemoryPlan, plan_memory

from .kernel import contiguous_strides

SHAPE_OPS = (*VIEW_OPS, "flip")  # ops whose result is a rearrangement of the operand's


@dataclass(frozen=True)
class Storage:
    kind: str  # "in" | "out" | "ws" | "const"
    index: int  # input/output number, workspace byte offset, or constant number
    nbytes: int


@dataclass(frozen=True)
class Loc:
    storage: int  # index into Layout.storages (-1: the value has no elements)
    offset: int  # elements
    strides: tuple[int, ...]  # elements


@dataclass
class Layout:
    fn: Function
    align: int  # bytes: workspace regions start at multiples of this
    storages: list[Storage] = field(default_factory=list)
    consts: list[np.ndarray] = field(default_factory=list)
    loc: dict[Value, Loc] = field(default_factory=dict)
    # shape-op results to copy, each with the strided location of its elements in the
    # operand's memory (None: a reshape that strides cannot express)
    materialize: dict[Value, Loc | None] = field(default_factory=dict)
    # (op, operand) -> a dedicated contiguous region the operand is copied to before the op
    copies: dict[tuple[int, int], Loc] = field(default_factory=dict)
    out_copies: list[tuple[int, Value]] = field(default_factory=list)
    out_storage: dict[int, int] = field(default_factory=dict)  # output number -> storage
    ws_bytes: int = 0  # the status words come first

    def add_storage(self, kind: str, index: int, nbytes: int) -> int:
        self.storages.append(Storage(kind, index, nbytes))
        return len(self.storages) - 1

    def workspace(self, nbytes: int) -> int:
        off = self.ws_bytes
        self.ws_bytes += -(-max(nbytes, 1) // self.align) * self.align
        return self.add_storage("ws", off, nbytes)

    def contiguous(self, storage: int, v: Value) -> Loc:
        return Loc(storage, 0, contiguous_strides(v.shape))

    def fresh(self, v: Value) -> Loc:
        """A dedicated contiguous workspace region for ``v``."""
        return self.contiguous(self.workspace(v.type.nbytes), v)


def memory_plan(fn: Function) -> MemoryPlan:
    """``fn``'s memory plan (planned here if the pipeline did not)."""
    plan = MemoryPlan.of(fn) or MemoryPlan.of(plan_memory(fn, PassContext()))
    assert plan is not None
    return plan


class LayoutBuilder:
    """Places inputs, constants, op results and outputs; a target decides which plan
    views it keeps (``view``) and which operands need a contiguous copy
    (``operand_copies``)."""

    def __init__(self, fn: Function, plan: MemoryPlan, align: int, status_bytes: int) -> None:
        self.fn, self.plan = fn, plan
        self.lay = Layout(fn, align, ws_bytes=status_bytes)
        self.buf = plan.buffer_of(fn)

    def run(self) -> Layout:
        lay = self.lay
        for k, v in enumerate(self.fn.inputs):
            lay.loc[v] = lay.contiguous(lay.add_storage("in", k, v.type.nbytes), v)
        self.buf_storage = self._buffer_storages()
        self.storage_buf = {s: b for b, s in self.buf_storage.items()}
        for i, op in enumerate(self.fn.ops):
            self.place(i, op)
            self.operand_copies(i, op)
        for j, v in enumerate(self.fn.outputs):
            want = lay.contiguous(lay.out_storage[j], v)
            if v.type.nbytes and lay.loc[v] != want:
                lay.out_copies.append((j, v))
        return lay

    def plan_view(self, op: Op, r: Value) -> bool:
        """The plan made ``r`` a view: it shares its operand's memory."""
        return op.name in VIEW_OPS and self.buf.get(r, -1) == self.buf.get(op.operands[0], -1)

    def _buffer_storages(self) -> dict[int, int]:
        """Plan buffers as storages (buffer -> storage); an output's buffer that holds
        nothing bigger (and that the plan did not make a view) is the caller's output
        array itself. Every output gets its storage in ``out_storage``."""
        lay, fn, plan = self.lay, self.fn, self.plan
        index = {r: i for i, op in enumerate(fn.ops) for r in op.results}
        claimed: dict[int, int] = {}
        for j, v in enumerate(fn.outputs):
            b = self.buf.get(v, -1)
            op = fn.ops[index[v]] if v in index else None
            if (b >= 0 and b not in claimed and v.type.nbytes and op is not None
                    and not self.plan_view(op, v) and plan.buffers[b] == v.type.nbytes):
                claimed[b] = j
        storages = {}
        for b, size in enumerate(plan.buffers):
            if b in claimed:
                storages[b] = lay.add_storage("out", claimed[b], size)
                lay.out_storage[claimed[b]] = storages[b]
            else:
                storages[b] = lay.workspace(size)
        for j, v in enumerate(fn.outputs):
            if j not in lay.out_storage:
                lay.out_storage[j] = lay.add_storage("out", j, v.type.nbytes)
        return storages

    # -- placing results ------------------------------------------------------------------
    def place(self, i: int, op: Op) -> None:
        lay = self.lay
        if op.name == "const":
            self.place_const(op)
            return
        for r in op.results:
            if r.type.nbytes == 0:
                lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
                self.placed(i, op, r, False)
                continue
            if op.name in VIEW_OPS:
                cand = self.view(i, op, r)
                if cand is not None:
                    lay.loc[r] = cand
                    self.placed(i, op, r, True)
                    continue
            if op.name in SHAPE_OPS:
                src = op.operands[0]
                lay.materialize[r] = self.view_loc(op, lay.loc[src], src.shape)
            b = self.buf.get(r, -1)
            if b >= 0 and self.plan.buffers[b] >= r.type.nbytes and not self.plan_view(op, r):
                lay.loc[r] = lay.contiguous(self.buf_storage[b], r)
            else:  # no buffer, or one we cannot follow: a region of its own
                lay.loc[r] = lay.fresh(r)
            self.placed(i, op, r, False)

    def place_const(self, op: Op) -> None:
        lay, r = self.lay, op.result
        if r.type.nbytes == 0:
            lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
            return
        value = op.attrs["value"]
        first = splat_scalar(value)
        lay.consts.append(np.ascontiguousarray(first if first is not None else value))
        s = lay.add_storage("const", len(lay.consts) - 1, lay.consts[-1].nbytes)
        lay.loc[r] = Loc(s, 0, (0,) * r.ndim) if first is not None else lay.contiguous(s, r)

    # -- what targets decide ----------------------------------------------------------------
    def view_loc(self, op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
        return view_loc(op, loc, shape)

    def view(self, i: int, op: Op, r: Value) -> Loc | None:
        """The location of shape op ``op``'s result ``r`` as a view, or None to copy it."""
        return None

    def placed(self, i: int, op: Op, r: Value, is_view: bool) -> None:
        """``r`` (of op ``i``) has its location."""

    def operand_copies(self, i: int, op: Op) -> None:
        """Ask for contiguous copies of operands op ``i`` cannot read where they are: a
        ``call``'s or a ``loop``'s strided operands (a target may add its own rules)."""
        if op.name not in ("call", "loop"):
            return
        for k, v in enumerate(op.operands):
            if v.type.nbytes and not is_contiguous(self.lay.loc[v], v.shape):
                self.lay.copies[(i, k)] = self.lay.fresh(v)


# -- view arithmetic ------------------------------------------------------------------------
def view_loc(op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
    """The location of shape op ``op``'s result as a view of ``loc``, or None."""
    if op.name != "reshape":
        return strided_view(op, loc, shape)
    st = reshape_strides(shape, loc.strides, op.attrs["shape"])
    return None if st is None else Loc(loc.storage, loc.offset, st)


def reshape_strides(old: tuple[int, ...], strides: tuple[int, ...],
                    new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides that view ``old``-shaped memory as ``new`` without copying, or None."""
    if int(np.prod(old, dtype=np.int64)) == 0:
        return contiguous_strides(new)
    od = [(d, s) for d, s in zip(old, strides, strict=True) if d != 1]
    nd = list(new)
    out: list[int] = []
    i = j = 0
    while j < len(nd):
        if nd[j] == 1:
            out.append(0)
            j += 1
            continue
        if i >= len(od):
            return None
        groups = _matching_group(od, nd, i, j)
        if groups is None:
            return None
        oi, nj = groups
        st = _group_strides(od, oi, nd, nj)
        if st is None:
            return None
        out.extend(st)
        i, j = oi[-1] + 1, nj[-1] + 1
    return tuple(out) if i == len(od) else None


def _matching_group(od: list[tuple[int, int]], nd: list[int], i: int, j: int
                    ) -> tuple[list[int], list[int]] | None:
    """The old axes from ``i`` and new axes from ``j`` whose sizes have equal products."""
    po, pn = od[i][0], nd[j]
    oi, nj = [i], [j]
    while po != pn:
        if po < pn:
            i += 1
            if i >= len(od):
                return None
            po *= od[i][0]
            oi.append(i)
        else:
            j += 1
            while j < len(nd) and nd[j] == 1:
                j += 1
            if j >= len(nd):
                return None
            pn *= nd[j]
            nj.append(j)
    return oi, nj


def _group_strides(od: list[tuple[int, int]], oi: list[int], nd: list[int], nj: list[int]
                   ) -> list[int] | None:
    """Strides of new axes ``nj[0]..nj[-1]`` over old axes ``oi`` (None unless those are
    one contiguous run of memory)."""
    for a, b in zip(oi, oi[1:], strict=False):
        if od[a][1] != od[b][1] * od[b][0]:
            return None
    st = od[oi[-1]][1]
    out = []
    for g in reversed(range(nj[0], nj[-1] + 1)):
        out.append(st if nd[g] != 1 else 0)
        if nd[g] != 1:
            st *= nd[g]
    return out[::-1]


def strided_view(op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
    """The location of a ``transpose``, ``broadcast``, ``slice`` or ``flip`` of the
    ``shape``-shaped value at ``loc``, as a view; None for any other op."""
    s, a = loc.strides, op.attrs
    if op.name == "transpose":
        return Loc(loc.storage, loc.offset, tuple(s[p] for p in a["perm"]))
    if op.name == "broadcast":
        out = a["shape"]
        lead = len(out) - len(shape)
        st = [0] * lead + [0 if d == 1 and o != 1 else x
                           for d, o, x in zip(shape, out[lead:], s, strict=True)]
        return Loc(loc.storage, loc.offset, tuple(st))
    if op.name == "slice":
        off = loc.offset + sum(b * x for b, x in zip(a["start"], s, strict=True))
        return Loc(loc.storage, off, tuple(x * c for x, c in zip(s, a["step"], strict=True)))
    if op.name == "flip":
        off, st = loc.offset, list(s)
        for ax in set(a["axes"]):
            if shape[ax] > 0:
                off += (shape[ax] - 1) * s[ax]
            st[ax] = -s[ax]
        return Loc(loc.storage, off, tuple(st))
    return None


def is_contiguous(loc: Loc, shape: tuple[int, ...]) -> bool:
    """Row-major without gaps (axes of length 1 may have any stride)."""
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return True
    s, ok = 1, True
    for d, x in zip(reversed(shape), reversed(loc.strides), strict=True):
        ok = ok and (d == 1 or x == s)
        s *= d
    return ok
