"""Tangents from a reverse rule, by transposition.

A reverse rule maps the cotangents ``dys`` of an op's results to cotangents ``g_i`` of its
operands: a linear map ``dys -> g = Jᵀ dys``. Its transpose is the forward map
``t -> J t``, and it is a gradient: with ``s(dys) = Σ_i <g_i(dys), t_i>``, the gradient
of ``s`` with respect to ``dys`` is ``J t``. So the rule's ops are built into a small
function of the cotangents, differentiated by the reverse sweep (``vjp``), and the ops of
its gradient are copied out: the tangents. Every op that has a reverse rule (LAPACK
factorizations, user primitives' rules, ops added later) gets forward mode this way.

>>> import numpy as np
>>> from yota.ir import Builder, TensorType, make_op, run
>>> from yota.ir.autodiff.rules import RULES
>>> b = Builder("f")
>>> a = b.input(TensorType("f64", (2, 2)), "a")
>>> x = b.input(TensorType("f64", (2, 1)), "x")
>>> ta = b.input(TensorType("f64", (2, 2)), "ta")
>>> op = b.append(make_op("solve", [a, x]))
>>> t, = transposed(b, op, [ta, None], lambda s, dys: RULES["solve"](s, op, dys[0]))
>>> A, X, TA = np.eye(2) * 2, np.ones((2, 1)), np.eye(2)
>>> run(b.build([t]), A, X, TA)[0].ravel().tolist()  # d(A⁻¹x) = -A⁻¹ dA A⁻¹ x
[-0.25, -0.25]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..core import Builder, Function, Op, Value
from ..types import is_float
from .helpers import add
from .registry import Grads
from .sweep import vjp

RuleOf = Callable[[Builder, list["Value | None"]], Grads]


def transposed(b: Builder, op: Op, ts: Sequence[Value | None], rule: RuleOf
               ) -> list[Value | None]:
    """The tangents of ``op``'s results, from the tangents ``ts`` of its operands and its
    reverse rule ``rule(builder, dys)`` (one cotangent per result, None for a non-float
    one), emitted into ``b``."""
    sub = Builder("transposed")
    sub.loc = b.loc
    dys = [Value(r.type) if is_float(r.dtype) else None for r in op.results]
    grads = rule(sub, dys)
    total = _pairing(sub, grads, ts, op.operands)
    if total is None:
        return [None] * len(op.results)
    given = [d for d in dys if d is not None]
    free = _free_values(sub.ops, set(given))
    fn = Function("transposed", free + given, sub.ops, [total], callees=sub.callees)
    g = vjp(fn, list(range(len(free), len(free) + len(given))))
    return _copy_out(b, g, dys, len(free))


def _pairing(b: Builder, grads: Grads, ts: Sequence[Value | None],
             operands: Sequence[Value]) -> Value | None:
    """``Σ_i <g_i, t_i>`` (float64), None when no operand has both."""
    total: Value | None = None
    for g, t, v in zip(grads, ts, operands, strict=True):
        if g is None or t is None:
            continue
        if g.type != v.type:  # a rule may leave broadcasting or a dtype to the sweep
            g = b.sum_to_shape(b.convert_to(g, v.dtype), v.shape)
        term = b.convert_to(b.sum(b.mul(g, t), axes=tuple(range(v.ndim))), np.float64)
        total = term if total is None else add(b, total, term)
    return total


def _free_values(ops: list[Op], bound: set[Value]) -> list[Value]:
    """The values ``ops`` read that they do not define (and not in ``bound``), in order."""
    defined = set(bound)
    free: list[Value] = []
    for op in ops:
        for v in op.operands:
            if v not in defined:
                defined.add(v)
                free.append(v)
        defined.update(op.results)
    return free


def _copy_out(b: Builder, g: Function, dys: list[Value | None], nfree: int
              ) -> list[Value | None]:
    """Copy into ``b`` the ops of ``g`` its gradient outputs need (a cotangent input read
    there, which the linearity of the rule rules out but for a zero, reads zeros)."""
    grads = list(g.attrs["grads"])
    outs = dict(zip(grads, g.outputs[1:], strict=True))
    live, kept = {v for v in g.outputs[1:]}, []
    for op in reversed(g.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    env: dict[Value, Value] = {}
    given = [d for d in dys if d is not None]
    for d in given:
        if d in live:
            env[d] = b.const(0.0, d.dtype, d.shape)
    for op in reversed(kept):  # (the same ops: their results are new to b)
        b.ops.append(op.replace(operands=[env.get(v, v) for v in op.operands], loc=b.loc))
    b.callees.update(g.callees)
    k = {id(d): nfree + j for j, d in enumerate(given)}
    return [None if d is None else _out(outs, k[id(d)], env) for d in dys]


def _out(outs: dict[int, Value], i: int, env: dict[Value, Value]) -> Value | None:
    v = outs.get(i)
    return None if v is None else env.get(v, v)
