"""Which values of a function carry gradient: the edges an op passes it through, and the
values on a differentiable path from the inputs differentiated to the outputs seeded."""

from __future__ import annotations

from ..core import Function, Op, Value
from ..types import is_float
from .registry import NONDIFF, nodiff_args


def edges(fn: Function, op: Op) -> list[int]:
    """Operand indices through which ``op`` passes gradient."""
    if op.name in NONDIFF or not any(is_float(r.dtype) for r in op.results):
        return []
    skip = nodiff_args(fn.callees[op.attrs["callee"]]) if op.name == "call" else set()
    return [i for i, v in enumerate(op.operands) if is_float(v.dtype) and i not in skip]


def active_values(fn: Function, wrt: set[Value], outs: set[Value]) -> set[Value]:
    """Values on a differentiable path from a ``wrt`` input to one of ``outs``."""
    fwd = forward_reach(fn, wrt)
    bwd = set(outs)
    for op in reversed(fn.ops):
        if any(r in bwd for r in op.results):
            bwd.update(op.operands[i] for i in edges(fn, op))
    return fwd & bwd


def forward_reach(fn: Function, wrt: set[Value]) -> set[Value]:
    """``wrt`` and the float values that depend on them through differentiable edges."""
    fwd = set(wrt)
    for op in fn.ops:
        if any(op.operands[i] in fwd for i in edges(fn, op)):
            fwd.update(r for r in op.results if is_float(r.dtype))
    return fwd
