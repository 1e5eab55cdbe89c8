"""Batching: ``vmap(fn, in_axes, size)`` runs ``fn`` on a batch of ``size`` examples at once.

Every value of ``fn`` becomes either *unbatched* (the same for every example: weights,
constants) or *batched*: one more axis, always axis 0 inside the program, holding the
examples. Inputs are moved to axis 0 where they enter and outputs to their ``out_axes``
where they leave. Each op with a batched operand is rewritten by its batching rule
(``rules.py``: elementwise ops broadcast, reductions and shape ops shift their axes;
``rules_index.py``: gathers and scatters index per example, ``matmul`` becomes one GEMM
over the folded examples or a batched product, LAPACK ops batch, guards check every
example; ``rules_loop.py``: loops batch their body, calls their callee); an op whose
operands are all unbatched is copied. An op without a rule raises ``MissingRuleError``
naming it.

>>> import numpy as np
>>> from yota.ir import Builder, TensorType, run
>>> b = Builder("f")
>>> w = b.input(TensorType("f64", (3, 2)), "w")
>>> x = b.input(TensorType("f64", (2, 1)), "x")
>>> f = b.build([b.matmul(w, x)])
>>> g = vmap(f, [None, 1], size=4)
>>> W, X = np.ones((3, 2)), np.arange(8.0).reshape(2, 4, 1)
>>> run(g, W, X)[0][:, :, 0].tolist()
[[4.0, 4.0, 4.0], [6.0, 6.0, 6.0], [8.0, 8.0, 8.0], [10.0, 10.0, 10.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import Builder, Function, Op, Value, make_op
from ..errors import MissingRuleError
from ..ops import get_opdef
from ..verifier import maybe_verify
from .base import BATCH_RULES, Batched, VmapError, elementwise, move_axis, to_batched


def vmap(fn: Function, in_axes: Sequence[int | None], size: int,
         out_axes: Sequence[int | None] | int | None = 0) -> Function:
    """``fn`` over a batch of ``size`` examples: input ``i`` has its examples along axis
    ``in_axes[i]`` (None: one value shared by all examples); output ``j`` has them along
    ``out_axes[j]`` (an int for all outputs; None: the output must not depend on the
    batch). ``attrs["batched_outputs"]`` lists the outputs that did."""
    if len(in_axes) != len(fn.inputs):
        raise VmapError(f"vmap: {len(in_axes)} input axes for the {len(fn.inputs)} inputs "
                        f"of @{fn.name}")
    outs_ax: list[int | None] = [out_axes] * len(fn.outputs) \
        if out_axes is None or isinstance(out_axes, int) else list(out_axes)
    b = Builder(f"{fn.name}_vmap")
    env: dict[Value, tuple[Value, bool]] = {}
    for v, ax, lab in zip(fn.inputs, in_axes, fn.input_labels, strict=True):
        if ax is None:
            env[v] = (b.input(v.type, lab), False)
            continue
        a = _axis(ax, v.ndim + 1, f"input {lab or v.type}")
        shape = v.shape[:a] + (size,) + v.shape[a:]
        env[v] = (move_axis(b, b.input(v.type.with_shape(shape), lab), a, 0), True)
    Batcher(b, fn, size).run(env)
    outputs, batched = [], []
    for j, (v, oax) in enumerate(zip(fn.outputs, outs_ax, strict=True)):
        nv, isb = env[v]
        batched.append(isb)
        if oax is None:
            if isb:
                raise VmapError(f"vmap: output {fn.output_labels[j] or j} of @{fn.name} "
                                "depends on the batched inputs, but its out_axes is None")
            outputs.append(nv)
            continue
        a = _axis(oax, v.ndim + 1, f"output {fn.output_labels[j] or j}")
        outputs.append(move_axis(b, to_batched(b, nv, isb, size), 0, a))
    attrs = {"batched_outputs": tuple(j for j, x in enumerate(batched) if x)}
    return maybe_verify(b.build(outputs, fn.output_labels, attrs))


def _axis(ax: int, ndim: int, what: str) -> int:
    if not isinstance(ax, int) or not -ndim <= ax < ndim:
        raise VmapError(f"vmap: axis {ax!r} of {what} is out of range (it has {ndim - 1} "
                        "dimensions before batching)")
    return ax % ndim


class Batcher:
    """Batches the ops of ``fn`` into builder ``b``: ``run(env)`` maps each of ``fn``'s
    values to (its value in ``b``, batched) from the inputs' in ``env``."""

    def __init__(self, b: Builder, fn: Function, size: int, taken: set[str] | None = None
                 ) -> None:
        self.b, self.fn, self.size = b, fn, size
        b.callees.update(fn.callees)
        self.taken = taken if taken is not None else set()
        self.taken.update(Function("", [], [], [], callees=b.callees).all_callees())
        self.taken.add(fn.name)

    def run(self, env: dict[Value, tuple[Value, bool]]) -> dict[Value, tuple[Value, bool]]:
        for op in self.fn.ops:
            xs = [env[v][0] for v in op.operands]
            bat = [env[v][1] for v in op.operands]
            with self.b.at(op.loc):
                outs = self.batch_op(op, xs, bat) if any(bat) else self.copy(op, xs)
            if len(outs) != len(op.results):
                raise VmapError(f"the batching rule of '{op.name}' gave {len(outs)} results "
                                f"for {len(op.results)}")
            env.update(zip(op.results, outs, strict=True))
        return env

    def copy(self, op: Op, xs: list[Value]) -> Batched:
        """An op of unbatched operands, as it was (fresh results: a callee's ops can be
        copied twice)."""
        new = op.replace(operands=xs, results=[Value(r.type) for r in op.results],
                         loc=self.b.loc)
        self.b.ops.append(new)
        return [(r, False) for r in new.results]

    def batch_op(self, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
        rule = BATCH_RULES.get(op.name)
        if rule is not None:
            return rule(self, op, xs, bat)
        if get_opdef(op.name).elementwise:
            return elementwise(self, op, xs, bat)
        raise MissingRuleError(missing_batch_message(op))

    def emit(self, op: Op, xs: Sequence[Value], **attrs: object) -> list[Value]:
        """Emit ``op``'s kind of op on ``xs`` with ``op``'s attributes, changed by
        ``attrs``."""
        new = make_op(op.name, xs, {**op.attrs, **attrs}, self.b.loc)
        self.b.ops.append(new)
        return list(new.results)


def missing_batch_message(op: Op) -> str:
    where = f" at {op.loc}" if op.loc else ""
    types = ", ".join(str(v.type) for v in op.operands)
    return (f"no batching (vmap) rule for op '{op.name}' (operands: {types}){where}; add one "
            "to BATCH_RULES in yota.ir.vmap")
