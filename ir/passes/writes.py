"""Writes made local: rewrites that let a buffer filled step by step be updated in place.

Programs that write into arrays (``update_slice``: a region of ``x`` replaced) and their
gradients (which add padded cotangents, ``add(x, pad(y))``) would otherwise touch the
whole buffer at every step. Two rewrites, applied to a fixed point:

- ``slice(update_slice(x, u, R), R)`` -> ``u``: reading back a region just written reads
  the value written, so the read no longer keeps any version of the buffer alive (and
  the buffer's versions can then be updated in place by the memory plan);
- ``add(x, pad(y))`` (either order, no broadcast) -> ``update_slice(x, slice(x, R) + y, R)``
  where ``R`` is the region ``pad`` puts ``y`` in: only ``R`` is computed; where that
  region of ``x`` is known to be zeros (just written so), the update is ``y`` itself.

The second rewrite changes the sign of zero in one case: outside ``R``, ``x + 0.0`` would
turn ``-0.0`` into ``+0.0``, the update keeps ``-0.0`` (the two compare equal; this is the
sign rule of accumulating into a buffer in place, as NumPy's ``x[R] += y`` does).
"""

from __future__ import annotations

from typing import Any

from ..core import Function, Op, Value
from .base import Pass, PassContext, rebuild, remap, resolve
from .patterns import Rewrite, View, chain, new

_REGION = ("start", "stop", "step")


def _pad_region(op: Op) -> dict[str, Any]:
    low, interior = op.attrs["low"], op.attrs["interior"]
    y = op.operands[0]
    step = tuple(i + 1 for i in interior)
    stop = tuple(lo + (d - 1) * s + 1 if d else lo
                 for lo, d, s in zip(low, y.shape, step, strict=True))
    return {"start": tuple(low), "stop": stop, "step": step}


def _written(m: View, x: Value, region: dict[str, Any]) -> Value | None:
    """The value last written to exactly ``region`` of ``x``, if ``x`` is that write."""
    up = m.producer(x, "update_slice")
    if up is not None and all(up.attrs[k] == region[k] for k in _REGION):
        return up.operands[1]
    return None


def read_written(op: Op, m: View) -> Rewrite | None:
    """slice(update_slice(x, u, R), R) -> u."""
    return _written(m, op.operands[0], {k: op.attrs[k] for k in _REGION})


def add_padded(op: Op, m: View) -> Rewrite | None:
    """add(x, pad(y)) -> update_slice(x, slice(x, R) + y, R)."""
    r = op.result
    for k in (0, 1):
        p = m.producer(op.operands[k], "pad")
        x = op.operands[1 - k]
        if p is None or x.shape != r.shape or op.operands[k].shape != r.shape:
            continue
        region = _pad_region(p)
        y = p.operands[0]
        cur = _written(m, x, region)
        if cur is not None and m.is_const(cur, 0):
            return chain(new("update_slice", x, y, loc=op.loc, **region))
        ops = [] if cur is not None else [new("slice", x, loc=op.loc, **region)]
        cur = cur if cur is not None else ops[0].result
        a = new("add", *((y, cur) if k == 0 else (cur, y)), loc=op.loc)
        return chain(*ops, a, new("update_slice", x, a.result, loc=op.loc, **region))
    return None


TABLE = {"slice": [read_written], "add": [add_padded]}


def writes(fn: Function, ctx: PassContext) -> Function:
    for _ in range(ctx.max_sweeps):
        view = View({}, ctx.fast_math)
        subst: dict[Value, Value] = {}
        ops: list[Op] = []
        fired = 0
        for op in fn.ops:
            op = remap(op, subst)
            rewrite = None
            for pattern in TABLE.get(op.name, []) if len(op.results) == 1 else []:
                rewrite = pattern(op, view)
                if rewrite is not None:
                    break
            if rewrite is None:
                ops.append(op)
                view.producers.update((v, op) for v in op.results)
                continue
            fired += 1
            new_ops, value = ([], rewrite) if isinstance(rewrite, Value) else rewrite
            for n in new_ops:
                ops.append(n)
                view.producers.update((v, n) for v in n.results)
            subst[op.result] = resolve(value, subst)
        if not fired:
            return fn
        fn = rebuild(fn, ops, subst)
    return fn


WRITES = Pass("writes", "read back what a write stored; add a padded cotangent into its "
              "region only, so step-by-step buffer fills can update in place", writes)
