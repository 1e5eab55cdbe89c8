"""View safety: how long the memory a view reads must stay unchanged, and which ops
write each buffer of a memory plan.

A backend that keeps the result of a shape op as a *view* of its operand's buffer (no
copy) must know that no op writes a new value into that buffer while the view, or any
view derived from it, is still read. The memory plan (``plan_memory``) keeps a buffer
from being *reused* while views of it are live, but it may let an elementwise op write
its result *in place* into a buffer that a view of it is read from at the same op; a
target that copies such views asks ``overwritten``.

This is an analysis, not a pass: it reads the function and its plan and changes nothing.

    >>> from yota.ir import parse
    >>> from yota.ir.passes import PassContext
    >>> from yota.ir.passes.plan_memory import MemoryPlan, plan_memory
    >>> f = plan_memory(parse('''
    ... func @f(%0: f32[2,3]) -> (f32[]) {
    ...   %1 = exp %0 : f32[2,3]
    ...   %2 = reshape %1 {shape = [6]} : f32[6]
    ...   %3 = neg %2 : f32[6]
    ...   %4 = sum %3 {axes = [0]} : f32[]
    ...   return %4
    ... }'''), PassContext())
    >>> plan = MemoryPlan.of(f)
    >>> plan.storage  # %1, its view %2 and %3 (in place) share buffer 0
    (0, 0, 0, 1)
    >>> life = view_lifetimes(f, plan)
    >>> life.writes[0]  # exp (op 0) and neg (op 2) write buffer 0
    [0, 2]
    >>> life.overwritten(0, 0, f.ops[1].result)  # the view %2 is read by op 2
    True
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..core import Function, Value
from .plan_memory import VIEW_OPS, MemoryPlan


@dataclass(frozen=True)
class ViewLifetimes:
    last: dict[Value, int]  # last op index reading a value or a view of it (n: returned)
    writes: dict[int, list[int]]  # plan buffer -> op indices writing a new value into it

    def overwritten(self, buffer: int, after: int, view: Value) -> bool:
        """Some op after op ``after`` writes ``buffer`` while ``view`` is still read."""
        w = self.writes.get(buffer, [])
        k = bisect.bisect_right(w, after)
        return k < len(w) and w[k] <= self.last.get(view, -1)


def view_lifetimes(fn: Function, plan: MemoryPlan) -> ViewLifetimes:
    buf = plan.buffer_of(fn)
    n = len(fn.ops)
    last: dict[Value, int] = {}
    for i, op in enumerate(fn.ops):
        for v in op.operands:
            last[v] = i
    for v in fn.outputs:
        last[v] = n
    for op in reversed(fn.ops):
        if op.name in VIEW_OPS:
            src, r = op.operands[0], op.result
            last[src] = max(last.get(src, -1), last.get(r, -1))
    writes: dict[int, list[int]] = {}
    for i, op in enumerate(fn.ops):
        for r in op.results:
            b = buf.get(r, -1)
            shares = op.name in VIEW_OPS and b == buf.get(op.operands[0], -1)
            if b >= 0 and not shares:
                writes.setdefault(b, []).append(i)
    return ViewLifetimes(last, writes)
