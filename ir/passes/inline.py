"""Inlining: each ``call`` of a sub-function (a primitive's body) is replaced by the
body's ops, so the passes after it see through primitives (and fuse across them)."""

from __future__ import annotations

from ..core import Function, Op, Value
from .base import Pass, PassContext, rebuild


def _inlined(body: Function, args: tuple[Value, ...], loc: str | None) -> tuple[list[Op],
                                                                                list[Value]]:
    """Fresh copies of ``body``'s ops (and of its calls, recursively) reading ``args``."""
    env: dict[Value, Value] = dict(zip(body.inputs, args, strict=True))
    ops: list[Op] = []
    for op in body.ops:
        operands = tuple(env[v] for v in op.operands)
        if op.name == "call":
            sub_ops, outs = _inlined(body.callees[op.attrs["callee"]], operands, op.loc)
            ops.extend(sub_ops)
            env.update(zip(op.results, outs, strict=True))
            continue
        new = op.replace(operands=operands, results=[Value(r.type) for r in op.results],
                         loc=op.loc or loc)
        env.update(zip(op.results, new.results, strict=True))
        ops.append(new)
    return ops, [env[v] for v in body.outputs]


def inline(fn: Function, ctx: PassContext) -> Function:
    if not any(op.name == "call" for op in fn.ops):
        return fn
    ops: list[Op] = []
    subst: dict[Value, Value] = {}
    for op in fn.ops:
        if op.name != "call":
            ops.append(op)
            continue
        args = tuple(subst.get(v, v) for v in op.operands)
        body_ops, outs = _inlined(fn.callees[op.attrs["callee"]], args, op.loc)
        ops.extend(body_ops)
        subst.update(zip(op.results, outs, strict=True))
    have = dict(fn.callees)
    for name in dict.fromkeys(op.attrs["callee"] for op in fn.ops if op.name == "call"):
        have.update(fn.callees[name].all_callees())  # what the inlined ops run comes along
    used = {op.attrs["callee"] for op in ops if "callee" in op.attrs}
    callees = {k: f for k, f in have.items() if k in used}
    return rebuild(fn, ops, subst, callees=callees)


INLINE = Pass("inline", "replace calls by the callee's ops so later passes see through them",
              inline)
