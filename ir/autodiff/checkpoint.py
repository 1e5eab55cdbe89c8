"""Checkpointed loops: a long loop's gradient keeps O(sqrt(T)) per-step values, not O(T).

The gradient of a loop saves, for every step, the values its backward step reads
(``rules_loop``): memory grows with the number of steps. ``checkpoint_loops`` splits a
loop of ``T`` steps into ``T // s`` segments of ``s`` steps (``s`` about ``sqrt(T)``): an
outer loop over the segments whose body runs an inner loop of ``s`` steps, and a loop of
the ``T % s`` steps left. The outer body is marked ``checkpoint``: its gradient saves only
the carried values at the start of each segment, and its backward step runs the segment
forward again (saving that segment's values) before running it backward. Memory:
``T/s`` saved carried values and one segment's values, ``O(sqrt(T))`` for ``s ~
sqrt(T)``; time: every step's forward runs twice.

Which loops (``policy``):

- ``"auto"`` (the default): a loop whose body's values over all steps would take more
  than ``AUTO_BYTES`` (256 MiB);
- ``True``: every loop of at least ``MIN_STEPS`` steps; an ``int`` ``s``: those, in
  segments of ``s`` steps;
- ``False``: none.

Every step computes what the plain loop's step computes: a checkpointed gradient equals
the plain one, to rounding (the sums over the steps of an invariant's cotangent are
added per segment first).
"""

from __future__ import annotations

import math

from ..core import Builder, Function, Op, Value
from ..loops import loop_op
from ..ops.loop import LoopShape
from ..types import TensorType

AUTO_BYTES = 256 << 20
MIN_STEPS = 4
Policy = bool | int | str


def checkpoint_loops(fn: Function, policy: Policy = "auto") -> Function:
    """``fn`` with the loops ``policy`` picks split into checkpointed segments."""
    if policy is False or not any(op.name == "loop" for op in fn.ops):
        return fn
    b = Builder(fn.name)
    b.inputs, b.input_labels = list(fn.inputs), list(fn.input_labels)
    b.callees = dict(fn.callees)
    subst: dict[Value, Value] = {}
    taken = set(fn.all_callees())
    for op in fn.ops:
        op = op.replace(operands=[subst.get(v, v) for v in op.operands]) if subst else op
        s = _segment(op, fn, policy)
        if s is None:
            b.append(op)
            continue
        with b.at(op.loc):
            subst.update(zip(op.results, _split(b, op, fn.callees[op.attrs["callee"]], s,
                                                taken), strict=True))
    if not subst:
        return fn
    return fn.replace(ops=b.ops, outputs=tuple(subst.get(v, v) for v in fn.outputs),
                      callees=b.callees)


def _segment(op: Op, fn: Function, policy: Policy) -> int | None:
    """The segment length for loop ``op``, or None to leave it."""
    if op.name != "loop":
        return None
    sh = LoopShape.of(op.attrs)
    if sh.reverse or sh.length < MIN_STEPS or fn.callees[op.attrs["callee"]].attrs.get(
            "checkpoint"):
        return None
    if policy == "auto":
        body = fn.callees[op.attrs["callee"]]
        per_step = sum(r.type.nbytes for o in body.ops for r in o.results
                       if r.dtype.kind == "f")
        if per_step * sh.length <= AUTO_BYTES:
            return None
    if isinstance(policy, int) and not isinstance(policy, bool):
        s = max(1, int(policy))
    else:
        s = max(1, math.isqrt(sh.length - 1) + 1)  # ceil(sqrt(T))
    return s if s < sh.length else None


def _split(b: Builder, op: Op, body: Function, s: int, taken: set[str]) -> list[Value]:
    """Loop ``op`` as an outer loop over segments of ``s`` steps (then the steps left);
    returns the values of its results."""
    sh = LoopShape.of(op.attrs)
    init, stacked, inv = sh.split_operands(list(op.operands))
    n, rest = divmod(sh.length, s)
    outer = _outer_body(body, op, s, _fresh(f"{body.name}_segments", taken))
    b.callees[outer.name] = outer
    seg = [b.reshape(_rows(b, x, 0, n * s), shape=(n, s) + x.shape[1:]) for x in stacked]
    res = b.append(loop_op(outer, [*init, *seg, *inv], length=n, carries=sh.carries,
                           stacked=len(seg), loc=op.loc)).results
    carried = list(res[:sh.carries])
    ys = [b.reshape(y, shape=(n * s,) + y.shape[2:]) for y in res[sh.carries:]]
    if rest:
        left = [_rows(b, x, n * s, sh.length) for x in stacked]
        tail = b.append(loop_op(body, [*carried, *left, *inv], length=rest,
                                carries=sh.carries, stacked=len(left), loc=op.loc)).results
        carried = list(tail[:sh.carries])
        ys = [b.concatenate(y, t, axis=0) for y, t in zip(ys, tail[sh.carries:], strict=True)]
    return carried + ys


def _outer_body(body: Function, op: Op, s: int, name: str) -> Function:
    """A step of the outer loop: the inner loop over one segment of ``s`` steps."""
    sh = LoopShape.of(op.attrs)
    ob = Builder(name)
    ins = [ob.input(_segment_type(v, s, sh, k), lab)
           for k, (v, lab) in enumerate(zip(op.operands, body.input_labels, strict=True))]
    ob.callees[body.name] = body
    with ob.at(op.loc):
        res = ob.append(loop_op(body, ins, length=s, carries=sh.carries,
                                stacked=sh.stacked, loc=op.loc)).results
    return ob.build(list(res), attrs={"checkpoint": True})


def _segment_type(v: Value, s: int, sh: LoopShape, k: int) -> TensorType:
    """The outer body's input type for operand ``k`` of the loop: a segment of a stacked
    operand, else the operand's own type."""
    if sh.carries <= k < sh.carries + sh.stacked:
        return v.type.with_shape((s,) + v.shape[1:])
    return v.type


def _rows(b: Builder, x: Value, lo: int, hi: int) -> Value:
    """Rows ``lo:hi`` of ``x`` along axis 0."""
    if lo == 0 and hi == x.shape[0]:
        return x
    return b.slice(x, start=(lo,) + (0,) * (x.ndim - 1), stop=(hi,) + x.shape[1:],
                   step=(1,) * x.ndim)


def _fresh(base: str, taken: set[str]) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}{i}"
    taken.add(name)
    return name
