"""Where every value of a function lives on the device: the memory plan rendered as
storages, plus views.

The memory plan (``yota.ir.passes.plan_memory``) assigns each op result a buffer. Here
each value gets a *location*: a storage (an input array, an output array, a region of
the call's workspace, a constant uploaded once) with an element offset and element
strides. A result the plan put in its operand's buffer (a ``transpose``, ``slice`` or
``broadcast``, or a ``reshape`` of a contiguous value) is a *view*: its location is the
operand's, with other strides, and no code runs for it; so is any such shape op of an
input or a constant that strides can express (nothing writes those during a call).
Every other shape op is *materialized*: copied into the buffer the plan gave it. The plan keeps a buffer alive
while views of it are read, so following it is safe on one stream.

An output whose buffer holds nothing bigger is written straight into the caller's output
array; other outputs are copied there at the end (``out_copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.ops.misc import splat_scalar
from yota.ir.passes import PassContext
from yota.ir.passes.plan_memory import VIEW_OPS, MemoryPlan, plan_memory

from ..layout_common import Loc, Storage, buffer_storages, is_contiguous, strided_view
from .kernel import contiguous_strides

ALIGN = 256  # bytes: cudaMalloc's alignment, and more than any vector access needs
STATUS_BYTES = 256  # the failure status words at the start of the workspace


@dataclass
class Layout:
    fn: Function
    storages: list[Storage] = field(default_factory=list)
    consts: list[np.ndarray] = field(default_factory=list)
    loc: dict[Value, Loc] = field(default_factory=dict)
    materialize: set[Value] = field(default_factory=set)
    out_copies: list[tuple[int, Value]] = field(default_factory=list)
    out_storage: dict[int, int] = field(default_factory=dict)
    ws_bytes: int = STATUS_BYTES

    def add_storage(self, kind: str, index: int, nbytes: int) -> int:
        self.storages.append(Storage(kind, index, nbytes))
        return len(self.storages) - 1

    def workspace(self, nbytes: int) -> int:
        off = self.ws_bytes
        self.ws_bytes += -(-max(nbytes, 1) // ALIGN) * ALIGN
        return self.add_storage("ws", off, nbytes)

    def fresh(self, v: Value) -> Loc:
        return Loc(self.workspace(v.type.nbytes), 0, contiguous_strides(v.shape))


def build_layout(fn: Function) -> Layout:
    plan = MemoryPlan.of(fn) or MemoryPlan.of(plan_memory(fn, PassContext()))
    assert plan is not None
    return _Builder(fn, plan).run()


class _Builder:
    def __init__(self, fn: Function, plan: MemoryPlan) -> None:
        self.fn, self.plan = fn, plan
        self.lay = Layout(fn)
        self.buf = plan.buffer_of(fn)

    def run(self) -> Layout:
        lay = self.lay
        for k, v in enumerate(self.fn.inputs):
            lay.loc[v] = Loc(lay.add_storage("in", k, v.type.nbytes), 0,
                             contiguous_strides(v.shape))
        self.buf_storage = buffer_storages(lay, self.fn, self.plan, self._plan_view)
        for op in self.fn.ops:
            self._place(op)
        for j, v in enumerate(self.fn.outputs):
            want = Loc(lay.out_storage[j], 0, contiguous_strides(v.shape))
            if v.type.nbytes and lay.loc[v] != want:
                lay.out_copies.append((j, v))
        return lay

    def _plan_view(self, op: Op, r: Value) -> bool:
        return op.name in VIEW_OPS and self.buf.get(r, -1) == self.buf.get(op.operands[0], -1)

    def _place(self, op: Op) -> None:
        lay = self.lay
        if op.name == "const":
            self._place_const(op)
            return
        for r in op.results:
            if r.type.nbytes == 0:
                lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
                continue
            if op.name in VIEW_OPS and (self._plan_view(op, r) or self._read_only(op, r)):
                src = op.operands[0]
                cand = view_loc(op, lay.loc[src], src.shape)
                if cand is not None:
                    lay.loc[r] = cand
                    continue
            if op.name in VIEW_OPS or op.name == "flip":
                lay.materialize.add(r)
            b = self.buf.get(r, -1)
            if b >= 0 and self.plan.buffers[b] >= r.type.nbytes and not self._plan_view(op, r):
                lay.loc[r] = Loc(self.buf_storage[b], 0, contiguous_strides(r.shape))
            else:  # no buffer, or one we cannot follow: a region of its own
                lay.loc[r] = lay.fresh(r)

    def _read_only(self, op: Op, r: Value) -> bool:
        """A shape op of an input or a constant (never written during a call) can be a
        view whenever strides express it, whatever buffer the plan gave it (a reshape of
        a slice of an input, say)."""
        st = self.lay.loc[op.operands[0]].storage
        return (r not in self.fn.outputs and st >= 0
                and self.lay.storages[st].kind in ("in", "const"))

    def _place_const(self, op: Op) -> None:
        lay, r = self.lay, op.result
        if r.type.nbytes == 0:
            lay.loc[r] = Loc(-1, 0, (0,) * r.ndim)
            return
        value = op.attrs["value"]
        first = splat_scalar(value)
        data = np.ascontiguousarray(first if first is not None else value)
        lay.consts.append(data)
        s = lay.add_storage("const", len(lay.consts) - 1, data.nbytes)
        lay.loc[r] = Loc(s, 0, (0,) * r.ndim if first is not None else
                         contiguous_strides(r.shape))


# -- view arithmetic ------------------------------------------------------------------------------
def view_loc(op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
    """The location of shape op ``op``'s result as a view of ``loc``, or None."""
    if op.name != "reshape":
        return strided_view(op, loc, shape)
    new = op.attrs["shape"]
    if not any(loc.strides):  # a splat (or a single element): zero strides in any shape
        return Loc(loc.storage, loc.offset, (0,) * len(new))
    if is_contiguous(loc, shape):
        return Loc(loc.storage, loc.offset, contiguous_strides(new))
    return None
