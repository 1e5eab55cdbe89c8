"""Batching rules of ``loop`` and ``call``.

A loop batches its body: the body's inputs are batched where the loop's operands are (a
stacked array's slices hold the examples on their axis 0: the stack ``[n, T, ...]`` is
laid out ``[T, n, ...]``), and a carried value is batched when its initial value is or
when the body makes it from a batched value (a fixed point over the carries: an
unbatched initial value is then broadcast). A step output the batch reaches is stacked
``[T, n, ...]`` and laid out ``[n, T, ...]`` after the loop. A call is batched by
batching its callee's ops in place (inlined).
"""

from __future__ import annotations

from typing import Any

from ..core import Builder, Function, Op, Value
from ..loops import loop_op
from ..ops.loop import LoopShape
from .base import Batched, batch_rule, fresh, move_axis, to_batched


@batch_rule("loop")
def _loop(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    body = bt.fn.callees[op.attrs["callee"]]
    sh = LoopShape.of(op.attrs)
    nc, ns = sh.carries, sh.stacked
    in_bat = list(bat)
    while True:
        new, out_bat = batch_body(bt, body, in_bat, nc)
        grow = [k for k in range(nc) if out_bat[k] and not in_bat[k]]
        if not grow:
            break
        bt.taken.discard(new.name)
        for k in grow:
            in_bat[k] = True
    b = bt.b
    b.callees[new.name] = new
    operands = [to_batched(b, x, bat[k], bt.size) if in_bat[k] else x
                for k, x in enumerate(xs[:nc])]
    operands += [move_axis(b, x, 0, 1) if bat[nc + i] else x
                 for i, x in enumerate(xs[nc:nc + ns])]
    operands += xs[nc + ns:]
    made = loop_op(new, operands, length=sh.length, carries=nc, stacked=ns,
                   reverse=sh.reverse, loc=b.loc)
    b.ops.append(made)
    out: Batched = [(r, in_bat[k]) for k, r in enumerate(made.results[:nc])]
    out += [(move_axis(b, r, 1, 0), True) if out_bat[j] else (r, False)
            for j, r in enumerate(made.results[nc:], start=nc)]
    return out


def batch_body(bt: Any, body: Function, in_bat: list[bool], nc: int
               ) -> tuple[Function, list[bool]]:
    """``body`` batched where ``in_bat`` says (inputs batched on axis 0), its first
    ``nc`` outputs batched where their inputs are; and which outputs are batched."""
    nb = Builder(fresh(f"{body.name}_vmap", bt.taken))
    env: dict[Value, tuple[Value, bool]] = {}
    for v, isb, lab in zip(body.inputs, in_bat, body.input_labels, strict=True):
        t = v.type.with_shape((bt.size,) + v.shape) if isb else v.type
        env[v] = (nb.input(t, lab), isb)
    type(bt)(nb, body, bt.size, bt.taken).run(env)
    outs, out_bat = [], []
    for j, v in enumerate(body.outputs):
        nv, isb = env[v]
        if j < nc and in_bat[j] and not isb:
            nv, isb = to_batched(nb, nv, False, bt.size), True
        outs.append(nv)
        out_bat.append(isb)
    return nb.build(outs, body.output_labels, dict(body.attrs)), out_bat


@batch_rule("call")
def _call(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    callee = bt.fn.callees[op.attrs["callee"]]
    if _opaque(callee):  # a Python function inside: called once per example
        return sequential(bt, op, xs, bat)
    env = {v: (x, isb) for v, x, isb in zip(callee.inputs, xs, bat, strict=True)}
    type(bt)(bt.b, callee, bt.size, bt.taken).run(env)
    return [env[v] for v in callee.outputs]


def _opaque(fn: Function) -> bool:
    return any(op.name == "callback" for op in fn.ops) or \
        any(_opaque(c) for c in fn.callees.values())


@batch_rule("callback")
def sequential(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    """``op`` once per example: a loop over the batch whose body is ``op`` on the
    examples' slices of its batched operands (an opaque primitive's Python function,
    whose batched meaning is unknown; a call of it keeps its derivative rule)."""
    b = bt.b
    body = Builder(fresh(f"{op.name}_per_example", bt.taken))
    stacked = [x for x, isb in zip(xs, bat, strict=True) if isb]
    inv = [x for x, isb in zip(xs, bat, strict=True) if not isb]
    ins_s = [body.input(x.type.with_shape(x.shape[1:])) for x in stacked]
    ins_i = [body.input(x.type) for x in inv]
    it_s, it_i = iter(ins_s), iter(ins_i)
    operands = [next(it_s) if isb else next(it_i) for isb in bat]
    new = op.replace(operands=operands, results=[Value(r.type) for r in op.results])
    body.ops.append(new)
    if op.name == "call":
        body.callees[op.attrs["callee"]] = bt.fn.callees[op.attrs["callee"]]
    fn = body.build(list(new.results))
    b.callees[fn.name] = fn
    made = loop_op(fn, stacked + inv, length=bt.size, carries=0, stacked=len(stacked),
                   loc=b.loc)
    b.ops.append(made)
    return [(r, True) for r in made.results]
