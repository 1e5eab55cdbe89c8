"""The gradient of a ``loop``: the forward loop saves what each step's gradient reads,
and a loop running backwards over the steps computes the cotangents.

For a loop whose body is ``f(c, x, w) -> (c', y)`` (carried ``c``, step slice ``x``,
invariant ``w``), the body's reverse sweep ``G(c, x, w, dc', dy) -> (dc, dx, dw)`` is
split (as JAX's partial evaluation splits a scan) into:

- ``F``, the body's own ops: the forward loop runs ``F``, which returns ``f``'s outputs
  and, stacked per step, the *residuals*: values of ``F`` that depend on the step and
  that the backward ops read (a carried value as it entered the step, a ``tanh``'s
  result...);
- ``B``, the ops of the reverse sweep (each runs once, in ``F`` or ``B``; in ``B`` only
  primal values are saved): the backward loop runs it with ``reverse = true``,
  carrying ``dc`` (each step's ``dc`` is the previous step's ``dc'``) and a running sum
  of ``dw``, and reading per step ``dy``, the residuals and the step slices ``x`` it
  needs; ``dx`` is stacked per step. Values of ``F`` that depend on no step (constants,
  ops of ``w`` alone) are computed again in ``B`` instead of being saved.

Only carried values on a differentiable path get cotangents: those whose initial value
is differentiated, or that the body makes from a differentiated value (a fixed point).

A body marked ``checkpoint`` (``checkpoint.py``: a segment of a long loop) saves only its
carried values as they enter each step; ``B`` computes again every other value it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import Builder, Function, Op, Value, make_op
from ..loops import loop_op
from ..ops.loop import LoopShape
from ..types import is_float
from .activity import forward_reach
from .helpers import add

CONST, INV, STEP = 0, 1, 2  # what a value of F depends on: nothing, invariants, the step


class LoopGrad:
    """The gradient of loop op ``op`` (its body ``body``), in a function whose active
    values are ``active``: ``op`` is the forward loop to run instead (the same results,
    then the residual stacks), ``backward(b, dys)`` emits the backward loop."""

    def __init__(self, op: Op, body: Function, active: set[Value], taken: set[str],
                 reverse: Any) -> None:
        self.orig, self.body = op, body
        self.shape = sh = LoopShape.of(op.attrs)
        self.remat = bool(body.attrs.get("checkpoint"))  # checkpoint.py: save carries only
        nc, ns = sh.carries, sh.stacked
        wrt = _wrt_inputs(op, body, active)
        self.carried = [k for k in range(nc) if k in wrt]
        self.stacked = [k for k in range(nc, nc + ns) if k in wrt]
        self.invariant = [k for k in range(nc + ns, len(body.inputs)) if k in wrt]
        self.ys = [j for j in range(nc, len(body.outputs))
                   if op.results[j] in active and is_float(body.outputs[j].dtype)]
        self.g = _body_sweep(body, wrt, self.carried, self.ys, taken, reverse)
        self._split()
        fwd_name = _fresh(f"{body.name}_fwd", taken)
        self.bwd = self._backward_body(_fresh(f"{body.name}_bwd", taken))
        self.fwd = self._forward_body(fwd_name)  # after B: B's reads make the residuals
        res_types = [v.type for v in self.residuals]
        self.op = op.replace(attrs={**op.attrs, "callee": self.fwd.name},
                             results=list(op.results) + [
                                 Value(t.with_shape((sh.length,) + t.shape)) for t in res_types])

    # -- splitting G into F and B ---------------------------------------------------------
    def _split(self) -> None:
        """``F``: the body's own ops (``Reverse`` copies them first); ``B``: the rest."""
        ops = self.g.b.ops
        n = len(self.body.ops)
        self.f_ops, self.b_ops = ops[:n], ops[n:]
        self.dep = _dependence(self.body, self.shape, self.f_ops)
        self.f_made = {r: op for op in self.f_ops for r in op.results}
        self.residuals: list[Value] = []  # F values (or carried inputs) saved per step
        self.read_stacked: list[int] = []  # body inputs (stacked) B reads: their slices
        self.read_inv: list[int] = []  # body inputs (invariant) B reads

    def _forward_body(self, name: str) -> Function:
        """``F``: the body's ops; outputs: the body's, then the residuals (found while
        building ``B``)."""
        body = self.body
        f = Function(name, body.inputs, self.f_ops, list(body.outputs) + self.residuals,
                     body.input_labels, None, dict(self.g.b.callees), self._attrs())
        return _dce(f)

    def _backward_body(self, name: str) -> Function:
        """``B``: inputs ``dc'`` and running sums (carried), ``dy``, residuals and step
        slices (stacked), invariants; outputs ``dc`` and running sums, then ``dx``."""
        e = _BEnv(self)
        for op in self.b_ops:
            e.copy(op)
        body = self.body
        outs = [e.grad(body.inputs[k]) for k in self.carried]
        outs += [e.acc(k) for k in self.invariant]
        outs += [e.grad(body.inputs[k]) for k in self.stacked]
        inputs = [e.dc[k] for k in self.carried] + [e.acc_in[k] for k in self.invariant]
        inputs += [e.dy[j] for j in self.ys] + e.res_in
        inputs += [e.x_in[k] for k in self.read_stacked] + [e.w_in[k] for k in self.read_inv]
        return _dce(Function(name, inputs, e.ops, outs, None, None, dict(self.g.b.callees),
                             self._attrs()))

    def _attrs(self) -> dict[str, object]:
        return {"checkpoint": True} if self.remat else {}

    # -- the backward loop ----------------------------------------------------------------
    def backward(self, b: Builder, dys: Sequence[Value | None]) -> list[Value | None]:
        """Emit the backward loop; the cotangents of the loop's operands."""
        op, sh = self.op, self.shape
        nres = len(op.results) - len(self.orig.results)

        def ct(j: int) -> Value:
            r = self.orig.results[j]
            d = dys[j]
            return d if d is not None else b.const(0, r.dtype, r.shape)
        operands = [ct(k) for k in self.carried]
        operands += [b.const(0, op.operands[k].dtype, op.operands[k].shape)
                     for k in self.invariant]
        operands += [ct(j) for j in self.ys]
        operands += list(op.results[len(op.results) - nres:])
        operands += [op.operands[k] for k in self.read_stacked]
        operands += [op.operands[k] for k in self.read_inv]
        b.callees[self.bwd.name] = self.bwd
        nc = len(self.carried) + len(self.invariant)
        back = b.append(loop_op(self.bwd, operands, length=sh.length, carries=nc,
                                stacked=len(self.ys) + nres + len(self.read_stacked),
                                reverse=not sh.reverse, loc=b.loc))
        grads: list[Value | None] = [None] * len(op.operands)
        for n, k in enumerate(self.carried + self.invariant + self.stacked):
            grads[k] = back.results[n]
        return grads


@dataclass
class _Sweep:
    """``G``: the body's ops and its reverse sweep (in ``b``), its cotangent inputs
    ``cts`` (one per differentiated carried output ``dc'``, then one per step output
    ``dy``), and the cotangents ``grads`` of the body's inputs."""

    b: Builder
    cts: list[Value]
    grads: dict[Value, Value]


def _body_sweep(body: Function, wrt: set[int], carried: list[int], ys: list[int],
                taken: set[str], reverse: Any) -> _Sweep:
    """``G`` by ``reverse`` (``sweep.Reverse``: passed in, as the sweep imports this)."""
    g = Builder(f"{body.name}_grad")
    seeded = [body.outputs[k] for k in carried] + [body.outputs[j] for j in ys]
    rev = reverse(g, body, {body.inputs[i] for i in wrt}, set(seeded), taken)
    cts = [Value(v.type) for v in seeded]
    seeds: dict[Value, Value] = {}
    with g.at(f"adjoint of loop body @{body.name}"):
        for v, d in zip(seeded, cts, strict=True):
            seeds[v] = add(g, seeds[v], d) if v in seeds else d
    got = rev.run(seeds)
    return _Sweep(g, cts, {v: got[v] for v in body.inputs if v in got})


def _dce(fn: Function) -> Function:
    from ..passes.base import PassContext
    from ..passes.dce import dce

    return dce(fn, PassContext())


def _wrt_inputs(op: Op, body: Function, active: set[Value]) -> set[int]:
    """Body inputs to differentiate: float stacked and invariant inputs whose operands
    are active, and the carried values on a differentiable path (a fixed point)."""
    sh = LoopShape.of(op.attrs)
    wrt = {k for k, v in enumerate(op.operands)
           if k >= sh.carries and v in active and is_float(v.dtype)}
    wrt |= {k for k in range(sh.carries) if op.operands[k] in active
            and is_float(op.operands[k].dtype)}
    while True:
        reach = forward_reach(body, {body.inputs[k] for k in wrt})
        more = {k for k in range(sh.carries) if body.outputs[k] in reach
                and is_float(body.outputs[k].dtype)} - wrt
        if not more:
            return wrt
        wrt |= more


def _dependence(body: Function, sh: LoopShape, ops: list[Op]) -> dict[Value, int]:
    """For the body's inputs and the results of ``ops``: CONST, INV or STEP."""
    dep: dict[Value, int] = {}
    for k, v in enumerate(body.inputs):
        dep[v] = INV if k >= sh.carries + sh.stacked else STEP
    for op in ops:
        d = max((dep.get(v, STEP) for v in op.operands), default=CONST)
        for r in op.results:
            dep[r] = d
    return dep


class _BEnv:
    """``B``'s ops and inputs, built from ``G``'s cotangent ops."""

    def __init__(self, lg: LoopGrad) -> None:
        self.lg = lg
        self.env: dict[Value, Value] = {}
        self.ops: list[Op] = []
        body = lg.body
        cts = lg.g.cts
        nc = len(lg.carried)
        self.dc = {k: Value(body.inputs[k].type) for k in lg.carried}
        self.dy = {j: Value(body.outputs[j].type) for j in lg.ys}
        for k, c in zip(lg.carried, cts[:nc], strict=True):
            self.env[c] = self.dc[k]
        for j, c in zip(lg.ys, cts[nc:], strict=True):
            self.env[c] = self.dy[j]
        self.acc_in = {k: Value(body.inputs[k].type) for k in lg.invariant}
        self.res_in: list[Value] = []
        self.x_in: dict[int, Value] = {}
        self.w_in: dict[int, Value] = {}
        self.index = {v: k for k, v in enumerate(body.inputs)}

    def copy(self, op: Op) -> Value | None:
        new = op.replace(operands=[self.value(v) for v in op.operands],
                         results=[Value(r.type) for r in op.results])
        self.ops.append(new)
        self.env.update(zip(op.results, new.results, strict=True))
        return None

    def value(self, v: Value) -> Value:
        """``B``'s value for ``G``'s value ``v``."""
        if v in self.env:
            return self.env[v]
        lg = self.lg
        k = self.index.get(v)
        if k is not None and k >= lg.shape.carries:
            new = self._input(k, v)
        elif k is None and self._recomputed(v):
            self._recompute(v)  # depends on no step, or checkpointed
            return self.env[v]
        else:
            new = Value(v.type)
            lg.residuals.append(v)
            self.res_in.append(new)
        self.env[v] = new
        return new

    def _recomputed(self, v: Value) -> bool:
        return self.lg.remat or self.lg.dep.get(v, STEP) < STEP

    def _recompute(self, v: Value) -> None:
        """Copy into ``B`` the ops of ``F`` that make ``v`` (and what they need that
        ``B`` does not have yet), in ``F``'s order: no recursion however long the chain."""
        lg = self.lg
        need: set[Op] = set()
        stack = [v]
        while stack:
            w = stack.pop()
            op = lg.f_made.get(w)
            if op is None or op in need or w in self.env or not self._recomputed(w):
                continue
            need.add(op)
            stack.extend(op.operands)
        for op in lg.f_ops:
            if op in need:
                self.copy(op)

    def _input(self, k: int, v: Value) -> Value:
        lg = self.lg
        if k < lg.shape.carries + lg.shape.stacked:
            lg.read_stacked.append(k)
            self.x_in[k] = Value(v.type)
            return self.x_in[k]
        lg.read_inv.append(k)
        self.w_in[k] = Value(v.type)
        return self.w_in[k]

    def grad(self, v: Value) -> Value:
        """The cotangent of body input ``v`` (zero where none reaches it)."""
        g = self.lg.g.grads.get(v)
        if g is not None:
            return self.value(g)
        return self._emit(make_op("const", [], {"value": _zeros(v)}))

    def acc(self, k: int) -> Value:
        """The running sum of invariant ``k``'s cotangent after this step."""
        g = self.lg.g.grads.get(self.lg.body.inputs[k])
        if g is None:
            return self.acc_in[k]
        return self._emit(make_op("add", [self.acc_in[k], self.value(g)]))

    def _emit(self, op: Op) -> Value:
        self.ops.append(op)
        return op.result


def _zeros(v: Value) -> Any:
    import numpy as np

    return np.broadcast_to(np.zeros((), v.dtype), v.shape)


def _fresh(base: str, taken: set[str]) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}{i}"
    taken.add(name)
    return name

