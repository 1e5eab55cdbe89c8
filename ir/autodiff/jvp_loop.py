"""The jvp of a ``loop``: one loop carrying the tangents beside the values.

For a body ``f(c, x, w) -> (c', y)`` (carried ``c``, step slice ``x``, invariant ``w``) the
new body is ``jvp(f)``, with its inputs and outputs placed as a loop wants them:
``(c, tc, x, tx, w, tw) -> (c', tc', y, ty)``. A carried value has a tangent when its
initial value has one or when the body makes it from a value with a tangent (a fixed
point over the carries); the stacked arrays and invariants with a tangent read their
tangent's slice or whole tangent; each step output a tangent reaches stacks its tangent.
The loop's results keep their values and add the tangents' final carries and stacks.
"""

from __future__ import annotations

from typing import Any

from ..core import Builder, Function, Op, Value
from ..loops import loop_op
from ..ops.loop import LoopShape
from ..types import is_float
from .activity import forward_reach


def tangent_or_zeros(b: Builder, tan: dict[Value, Value], v: Value) -> Value:
    t = tan.get(v)
    return t if t is not None else b.const(0.0, v.dtype, v.shape)


def fresh(base: str, taken: set[str]) -> str:
    """A callee name not in ``taken`` (then taken)."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def loop_jvp(fw: Any, op: Op, ts: list[Value | None]) -> tuple[Op, list[Value | None]]:
    """The loop to run in place of ``op`` (its results first, then the tangents') and the
    tangent of each of ``op``'s results (None where zero). ``fw``: the ``jvp.Forward``
    sweeping the function that holds ``op`` (its class sweeps the body)."""
    b = fw.b
    body = fw.fn.callees[op.attrs["callee"]]
    sh = LoopShape.of(op.attrs)
    nc, ns = sh.carries, sh.stacked
    active = _active(body, nc, {k for k, t in enumerate(ts) if t is not None})
    new_body, ys = _body(fw, body, sh, active)
    b.callees[new_body.name] = new_body
    operands: list[Value] = []
    for lo, hi in ((0, nc), (nc, nc + ns), (nc + ns, len(op.operands))):
        operands += op.operands[lo:hi]
        operands += [_tangent(b, ts[k], op.operands[k]) for k in range(lo, hi) if k in active]
    carried = [k for k in range(nc) if k in active]
    stacked = [k for k in range(nc, nc + ns) if k in active]
    made = loop_op(new_body, operands, length=sh.length, carries=nc + len(carried),
                   stacked=ns + len(stacked), reverse=sh.reverse, loc=b.loc)
    res, ny, nt = list(made.results), len(op.results) - nc, nc + len(carried)
    tc, ty = res[nc:nt], res[nt + ny:]
    results = list(op.results[:nc]) + tc + list(op.results[nc:]) + ty
    outs: list[Value | None] = [None] * len(op.results)
    for k, t in zip(carried, tc, strict=True):
        outs[k] = t
    for j, t in zip(ys, ty, strict=True):
        outs[j] = t
    return made.replace(results=results), outs


def _tangent(b: Builder, t: Value | None, v: Value) -> Value:
    return t if t is not None else b.const(0.0, v.dtype, v.shape)


def _active(body: Function, nc: int, seeded: set[int]) -> set[int]:
    """The body inputs with a tangent: the seeded ones, and the carries the body makes
    from one (until none is added)."""
    active = {k for k in seeded if is_float(body.inputs[k].dtype)}
    while True:
        reach = forward_reach(body, {body.inputs[k] for k in active})
        new = {k for k in range(nc) if k not in active and body.outputs[k] in reach}
        if not new:
            return active
        active |= new


def _body(fw: Any, body: Function, sh: LoopShape, active: set[int]
          ) -> tuple[Function, list[int]]:
    """The body's jvp, laid out for a loop; and the step outputs whose tangents it
    stacks."""
    nc, ns = sh.carries, sh.stacked
    jb = Builder(fresh(f"{body.name}_jvp", fw.taken))
    seeds: dict[Value, Value] = {}
    for lo, hi in ((0, nc), (nc, nc + ns), (nc + ns, len(body.inputs))):
        jb.inputs += body.inputs[lo:hi]
        jb.input_labels += body.input_labels[lo:hi]
        for k in range(lo, hi):
            if k in active:
                seeds[body.inputs[k]] = jb.input(body.inputs[k].type, f"tangent %{k}")
    tan = type(fw)(jb, body, fw.taken).run(seeds)
    outs = list(body.outputs[:nc])
    outs += [tangent_or_zeros(jb, tan, body.outputs[k]) for k in range(nc) if k in active]
    ys = [j for j in range(nc, len(body.outputs)) if body.outputs[j] in tan]
    outs += list(body.outputs[nc:]) + [tan[body.outputs[j]] for j in ys]
    return jb.build(outs, attrs=dict(body.attrs)), ys
