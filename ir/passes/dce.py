"""Dead code elimination: drop ops whose results nothing reads, and unused callees.

Outputs are live, and so is every op with an effect (a ``guard``, or a call of a body
that contains one), with everything they read.
"""

from __future__ import annotations

from ..core import Function, Op, Value
from .base import Pass, PassContext, has_effect


def dce(fn: Function, ctx: PassContext) -> Function:
    live: set[Value] = set(fn.outputs)
    kept: list[Op] = []
    for op in reversed(fn.ops):
        if has_effect(op, fn.callees) or any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    kept.reverse()
    used = {op.attrs["callee"] for op in kept if "callee" in op.attrs}
    callees = {k: f for k, f in fn.callees.items() if k in used}
    if len(kept) == len(fn.ops) and len(callees) == len(fn.callees):
        return fn
    return fn.replace(ops=kept, callees=callees)


DCE = Pass("dce", "drop ops nothing reads (guards and outputs are live) and unused callees",
           dce)
