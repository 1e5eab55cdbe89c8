"""The reverse sweep: ``vjp(fn)`` appends the backward pass to ``fn``'s forward ops.

Only *active* values get cotangents: those reachable from a ``wrt`` input through
differentiable edges that also reach the output. Each rule runs in a scratch builder
whose ops are kept only when a needed cotangent depends on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import Builder, Function, Op, Value
from ..errors import MissingRuleError
from ..ops import get_opdef
from ..ops.shape import broadcastable
from ..types import is_float
from ..verifier import maybe_verify
from .activity import active_values, edges
from .helpers import add
from .registry import AutodiffError, Grads, primitive_key
from .rules import RULES
from .rules_loop import LoopGrad
from .rules_misc import call_vjp, missing_op_message


def vjp(fn: Function, wrt: Sequence[int] | None = None) -> Function:
    """The function computing ``fn``'s value and its gradients with respect to ``wrt``.

    ``fn`` must have one output, a 0-d float. The result takes ``fn``'s inputs and returns
    ``[value, grad...]``, one gradient per ``wrt`` input connected to the output (listed in
    its ``attrs["grads"]``).

    >>> from yota.ir import Builder, TensorType, run
    >>> b = Builder("f")
    >>> x = b.input(TensorType("f64", (3,)), "x")
    >>> f = b.build([b.sum(b.mul(x, x), axes=(0,))])
    >>> [a.tolist() for a in run(vjp(f), [1.0, 2.0, 3.0])]
    [14.0, [2.0, 4.0, 6.0]]
    """
    out = _check_scalar(fn)
    idx = _wrt(fn, wrt)
    b = Builder(f"{fn.name}_vjp")
    b.inputs, b.input_labels = list(fn.inputs), list(fn.input_labels)
    rev = Reverse(b, fn, {fn.inputs[i] for i in idx}, {out})
    seeds = {}
    if out in rev.active:
        with b.at(f"adjoint of {rev.names[out]} via rule seed"):
            seeds[out] = b.const(1.0, out.dtype, ())
    ct = rev.run(seeds)
    grads = tuple(i for i in idx if fn.inputs[i] in ct)
    labels = ["value"] + [f"grad {fn.input_labels[i] or f'%{i}'}" for i in grads]
    outputs = [out] + [ct[fn.inputs[i]] for i in grads]
    return maybe_verify(b.build(outputs, labels, {"grads": grads}))


class Reverse:
    """Reverse mode on ``fn`` into builder ``b``: made, it appends ``fn``'s ops to ``b``;
    ``run(seeds)`` then appends the reverse sweep from the cotangents ``seeds`` of some
    of ``fn``'s outputs (``outs``), and returns the cotangents of the values on a path
    from ``wrt`` (inputs of ``fn``) to those outputs, the inputs' among them.

    A ``loop`` op is replaced by one that also saves, per step, what its gradient reads
    (``rules_loop``)."""

    def __init__(self, b: Builder, fn: Function, wrt: set[Value], outs: set[Value],
                 taken: set[str] | None = None) -> None:
        self.b, self.fn = b, fn
        self.active = active_values(fn, wrt, outs)
        self.names = _names(fn)
        self.loops: dict[Op, LoopGrad] = {}
        b.callees.update(fn.callees)
        taken = set(Function("", [], [], [], callees=b.callees).all_callees()) | (taken or set())
        for op in fn.ops:
            if op.name == "loop" and any(op.operands[i] in self.active
                                         for i in edges(fn, op)) \
                    and any(r in self.active for r in op.results):
                lg = LoopGrad(op, fn.callees[op.attrs["callee"]], self.active, taken,
                              type(self))
                self.loops[op] = lg
                b.callees[lg.fwd.name] = lg.fwd
                op = lg.op
            b.ops.append(op)

    def run(self, seeds: dict[Value, Value]) -> dict[Value, Value]:
        ct = {v: g for v, g in seeds.items() if v in self.active}
        for op in reversed(self.fn.ops):
            _backprop(self.b, self.fn, op, ct, self.active, self.names, self.loops)
        return ct


def _check_scalar(fn: Function) -> Value:
    if len(fn.outputs) != 1:
        raise AutodiffError(f"vjp needs a function with exactly one output (a 0-d float); "
                            f"@{fn.name} has {len(fn.outputs)}")
    out = fn.outputs[0]
    if out.ndim != 0 or not is_float(out.dtype):
        raise AutodiffError(f"vjp needs a 0-d float output; @{fn.name} returns {out.type}")
    return out


def _wrt(fn: Function, wrt: Sequence[int] | None) -> list[int]:
    """The requested input indices that can have a gradient (float inputs), in order."""
    if wrt is None:
        wrt = range(len(fn.inputs))
    out: dict[int, None] = {}  # (a dict: membership in O(1), insertion order kept)
    for i in wrt:
        if not isinstance(i, int) or not 0 <= i < len(fn.inputs):
            raise AutodiffError(f"vjp: wrt index {i!r} is not an input of @{fn.name} "
                                f"(it has {len(fn.inputs)})")
        if is_float(fn.inputs[i].dtype):
            out.setdefault(i)
    return list(out)


def _names(fn: Function) -> dict[Value, str]:
    """Value names as the printer assigns them: inputs, then op results in order."""
    vals = list(fn.inputs) + [r for op in fn.ops for r in op.results]
    return {v: f"%{i}" for i, v in enumerate(vals)}


def _backprop(b: Builder, fn: Function, op: Op, ct: dict[Value, Value], active: set[Value],
              names: dict[Value, str], loops: dict[Op, LoopGrad]) -> None:
    """Emit the cotangents ``op`` sends to its active operands, accumulating into ``ct``."""
    needed = [i for i in edges(fn, op) if op.operands[i] in active]
    dys = [ct.get(r) for r in op.results]
    if not needed or all(d is None for d in dys):
        return
    rule_name = _rule_name(fn, op)
    sub = Builder(b.name)
    with sub.at(f"adjoint of {names[op.results[0]]} via rule {rule_name}"):
        grads = (loops[op].backward(sub, dys) if op in loops
                 else _apply_rule(sub, fn, op, dys, needed))
        for i in needed:
            if grads[i] is not None:
                v = op.operands[i]
                g = _fit(sub, grads[i], v, rule_name)
                ct[v] = add(sub, ct[v], g) if v in ct else g
    _flush(b, sub, [ct[op.operands[i]] for i in needed if op.operands[i] in ct])


def _rule_name(fn: Function, op: Op) -> str:
    if op.name == "call":
        return primitive_key(fn.callees[op.attrs["callee"]])
    return op.name


def _apply_rule(sub: Builder, fn: Function, op: Op, dys: list[Value | None],
                needed: list[int]) -> Grads:
    if op.name == "call":
        zeros = [d if d is not None else sub.const(0, r.dtype, r.shape)
                 for d, r in zip(dys, op.results, strict=True)]
        grads = call_vjp(sub, op, fn.callees[op.attrs["callee"]], zeros, needed)
    elif op.name in RULES:  # an op with several results gets all their cotangents
        dy: Any = dys[0] if len(op.results) == 1 else dys
        grads = RULES[op.name](sub, op, dy)
    else:
        raise MissingRuleError(missing_op_message(op))
    if len(grads) != len(op.operands):
        raise AutodiffError(f"the rule of {_rule_name(fn, op)!r} gave {len(grads)} cotangents "
                            f"for {len(op.operands)} operands")
    return grads


def _fit(sub: Builder, g: Value | None, v: Value, rule_name: str) -> Value:
    """A rule's cotangent ``g`` as ``v``'s type (summing broadcast axes, converting)."""
    if isinstance(g, Value) and g.type == v.type:
        return g
    if isinstance(g, Value) and is_float(g.dtype) and broadcastable(v.shape, g.shape):
        return sub.sum_to_shape(sub.convert_to(g, v.dtype), v.shape)
    got = g.type if isinstance(g, Value) else type(g).__name__
    raise AutodiffError(f"the rule of {rule_name!r} gave a cotangent of type {got} "
                        f"for an operand of type {v.type}")


def _flush(b: Builder, sub: Builder, keep: list[Value]) -> None:
    """Move to ``b`` the ops of ``sub`` that ``keep`` depends on (a local dead-code pass)."""
    live, kept = set(keep), []
    for op in reversed(sub.ops):
        if get_opdef(op.name).effect or any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    b.ops.extend(reversed(kept))
    b.callees.update(sub.callees)
