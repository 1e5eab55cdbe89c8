"""Forward mode: ``jvp(fn)`` computes ``fn``'s outputs and their tangents in one sweep.

Each op is copied, then followed by the ops computing its results' tangents from its
operands' tangents (values without a tangent have tangent zero, and emit nothing). Where
the tangent comes from, first match:

1. ``JVP_RULES`` (``rules_jvp.py``): shape, reduction, indexing ops, ``matmul``,
   ``convert``, ``select`` -- one line each, beside nothing else;
2. an elementwise op with a reverse rule in ``RULES``: its Jacobian is diagonal, so the
   reverse rule applied to a tangent is the tangent (self-adjoint; no new rule needed,
   and ops added later with a reverse rule are covered);
3. ``loop``: a loop carrying tangents beside the values (``jvp_loop.py``); ``call``: a
   call of the callee's jvp, or, for a primitive with a registered rule, that rule
   transposed;
4. any other op with a reverse rule (LAPACK factorizations, ops added later): the rule,
   linear in the cotangent, transposed (``transpose.py``).

An op with none raises ``MissingRuleError`` naming it. The rules emit ordinary IR, so a
jvp program is optimized, fused and differentiated again like any other.

>>> from yota.ir import Builder, TensorType, run
>>> b = Builder("f")
>>> x = b.input(TensorType("f64", (2,)), "x")
>>> f = b.build([b.sin(x)])
>>> y, t = run(jvp(f), [0.0, 1.0], [1.0, 2.0])
>>> [round(v, 6) for v in t.tolist()]
[1.0, 1.080605]
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import Builder, Function, Op, Value
from ..errors import MissingRuleError
from ..ops import get_opdef
from ..types import is_float
from ..verifier import maybe_verify
from .activity import edges
from .helpers import add
from .jvp_loop import fresh, loop_jvp, tangent_or_zeros
from .registry import CALL_RULES, AutodiffError, primitive_key
from .rules import RULES
from .rules_jvp import JVP_RULES, Tangents
from .rules_misc import call_vjp
from .transpose import transposed


def jvp(fn: Function, wrt: Sequence[int] | None = None) -> Function:
    """The function computing ``fn``'s outputs and their tangents.

    It takes ``fn``'s inputs, then one tangent per float input in ``wrt`` (default: all
    inputs; listed in its ``attrs["tangents"]``), and returns ``fn``'s outputs, then the
    tangent of each float output (listed in ``attrs["tangent_outputs"]``; zeros where no
    tangent reaches it).
    """
    idx = [i for i in (range(len(fn.inputs)) if wrt is None else wrt)
           if _check_index(fn, i) and is_float(fn.inputs[i].dtype)]
    idx = list(dict.fromkeys(idx))
    b = Builder(f"{fn.name}_jvp")
    b.inputs, b.input_labels = list(fn.inputs), list(fn.input_labels)
    seeds = {fn.inputs[i]: b.input(fn.inputs[i].type, f"tangent {_label(fn, i, True)}")
             for i in idx}
    tan = Forward(b, fn).run(seeds)
    outputs, labels, touts = list(fn.outputs), list(fn.output_labels), []
    for j, v in enumerate(fn.outputs):
        if is_float(v.dtype):
            outputs.append(tangent_or_zeros(b, tan, v))
            labels.append(f"tangent {_label(fn, j, False)}")
            touts.append(j)
    return maybe_verify(b.build(outputs, labels, {"tangents": tuple(idx),
                                                  "tangent_outputs": tuple(touts)}))


def _check_index(fn: Function, i: object) -> bool:
    if not isinstance(i, int) or not 0 <= i < len(fn.inputs):
        raise AutodiffError(f"jvp: {i!r} is not an input of @{fn.name} "
                            f"(it has {len(fn.inputs)})")
    return True


def _label(fn: Function, i: int, inp: bool) -> str:
    lab = (fn.input_labels if inp else fn.output_labels)[i]
    return lab or f"{'%' if inp else 'output '}{i}"


class Forward:
    """Forward mode on ``fn`` into builder ``b``: ``run(seeds)`` appends ``fn``'s ops and
    their tangents to ``b``, from the tangents ``seeds`` of some of ``fn``'s inputs, and
    returns the tangent of every value one reaches. ``taken``: callee names in use (the
    loop bodies and callees it makes get fresh ones)."""

    def __init__(self, b: Builder, fn: Function, taken: set[str] | None = None) -> None:
        self.b, self.fn = b, fn
        b.callees.update(fn.callees)
        self.taken = taken if taken is not None else set()
        self.taken.update(Function("", [], [], [], callees=b.callees).all_callees())
        self.taken.add(fn.name)
        self.names = {v: f"%{i}" for i, v in enumerate(
            list(fn.inputs) + [r for op in fn.ops for r in op.results])}

    def run(self, seeds: dict[Value, Value]) -> dict[Value, Value]:
        tan = dict(seeds)
        for op in self.fn.ops:
            live = edges(self.fn, op)
            ts = [tan.get(v) if i in live else None for i, v in enumerate(op.operands)]
            if all(t is None for t in ts):
                self.b.ops.append(op)
                continue
            self._step(op, ts, tan)
        return tan

    def _step(self, op: Op, ts: list[Value | None], tan: dict[Value, Value]) -> None:
        rule = self._rule_name(op)
        outs: Tangents
        with self.b.at(f"tangent of {self.names[op.results[0]]} via rule {rule}"):
            if op.name == "loop":
                new, outs = loop_jvp(self, op, ts)
                self.b.ops.append(new)
            elif op.name == "call" and rule not in CALL_RULES:
                new, outs = self._call_through(op, ts)
                self.b.ops.append(new)
            else:
                self.b.ops.append(op)
                sub = Builder(self.b.name)
                sub.loc = self.b.loc
                outs = self._tangents(sub, op, ts)
                outs = [_fit(sub, t, r, rule) for t, r in zip(outs, op.results, strict=True)]
                flush(self.b, sub, [t for t in outs if t is not None])
        for r, t in zip(op.results, outs, strict=True):
            if t is not None and is_float(r.dtype):
                tan[r] = t

    def _rule_name(self, op: Op) -> str:
        if op.name == "call":
            return primitive_key(self.fn.callees[op.attrs["callee"]])
        return op.name

    def _tangents(self, sub: Builder, op: Op, ts: list[Value | None]) -> Tangents:
        name = op.name
        if name in JVP_RULES:
            return JVP_RULES[name](sub, op, ts)
        opdef = get_opdef(name)
        if name in RULES and opdef.elementwise and _same_types(op, ts):
            return [self_adjoint(sub, op, ts)]
        if name == "call":
            callee = self.fn.callees[op.attrs["callee"]]
            need = [i for i, t in enumerate(ts) if t is not None]
            return transposed(sub, op, ts, lambda s, dys: call_vjp(
                s, op, callee, [_zeros_for(s, d, r) for d, r in zip(dys, op.results,
                                                                    strict=True)], need))
        if name in RULES:
            return transposed(sub, op, ts, lambda s, dys: RULES[name](
                s, op, dys[0] if len(op.results) == 1 else dys))  # type: ignore[arg-type]
        raise MissingRuleError(missing_jvp_message(op))

    def _call_through(self, op: Op, ts: list[Value | None]) -> tuple[Op, Tangents]:
        """A call of a function without a registered rule: a call of its jvp."""
        callee = self.fn.callees[op.attrs["callee"]]
        active = [i for i, t in enumerate(ts) if t is not None]
        jb = Builder(fresh(f"{callee.name}_jvp", self.taken))
        jb.inputs, jb.input_labels = list(callee.inputs), list(callee.input_labels)
        seeds = {callee.inputs[i]: jb.input(callee.inputs[i].type, f"tangent %{i}")
                 for i in active}
        tan = Forward(jb, callee, self.taken).run(seeds)
        touts = [j for j, v in enumerate(callee.outputs) if v in tan]
        body = jb.build(list(callee.outputs) + [tan[callee.outputs[j]] for j in touts])
        self.b.callees[body.name] = body
        results = [Value(callee.outputs[j].type) for j in touts]
        new = Op("call", list(op.operands) + [t for t in ts if t is not None],
                 {"callee": body.name}, list(op.results) + results, self.b.loc)
        outs: Tangents = [None] * len(op.results)
        for j, r in zip(touts, results, strict=True):
            outs[j] = r
        return new, outs


def _same_types(op: Op, ts: list[Value | None]) -> bool:
    """Each operand with a tangent has the single result's type (so the op's Jacobian with
    respect to it is diagonal)."""
    if len(op.results) != 1:
        return False
    t = op.results[0].type
    return all(v.type == t for v, d in zip(op.operands, ts, strict=True) if d is not None)


def self_adjoint(b: Builder, op: Op, ts: list[Value | None]) -> Value | None:
    """The tangent of an elementwise op from its reverse rule: with a diagonal Jacobian
    the cotangent rule applied to operand ``i``'s tangent is that operand's part of the
    result's tangent; the parts add up."""
    out: Value | None = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        g = RULES[op.name](b, op, t)[i]
        if g is not None:
            out = g if out is None else add(b, out, g)
    return out


def _zeros_for(b: Builder, d: Value | None, r: Value) -> Value:
    return d if d is not None else b.const(0, r.dtype, r.shape)


def _fit(b: Builder, t: Value | None, r: Value, rule: str) -> Value | None:
    """A rule's tangent as result ``r``'s type (converted; None for a non-float result)."""
    if t is None or not is_float(r.dtype):
        return None
    if t.type == r.type:
        return t
    if t.shape == r.shape and is_float(t.dtype):
        return b.convert_to(t, r.dtype)
    raise AutodiffError(f"the forward-mode rule of {rule!r} gave a tangent of type {t.type} "
                        f"for a result of type {r.type}")


def flush(b: Builder, sub: Builder, keep: list[Value]) -> None:
    """Move to ``b`` the ops of ``sub`` that ``keep`` depends on (and effects)."""
    live, kept = set(keep), []
    for op in reversed(sub.ops):
        if get_opdef(op.name).effect or any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    b.ops.extend(reversed(kept))
    b.callees.update(sub.callees)


def missing_jvp_message(op: Op) -> str:
    where = f" at {op.loc}" if op.loc else ""
    types = ", ".join(str(v.type) for v in op.operands)
    return (f"no forward-mode (jvp) rule for op '{op.name}' (operands: {types}){where}; add "
            "one to JVP_RULES in yota.ir.autodiff.rules_jvp, or a reverse rule to RULES "
            "(forward mode transposes it)")
