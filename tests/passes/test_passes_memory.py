"""The memory plan: checked by running programs with every planned value stored in its
buffer, so a plan that lets two live values share memory gives wrong results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import precision
from support.irgen import example_inputs, mlp_loss, random_program
from yota.ir import (
    Function,
    GuardFailed,
    Value,
    get_opdef,
    make_op,
    parse,
    print_function,
    run,
)
from yota.ir.autodiff import vjp
from yota.ir.passes import MemoryPlan, PassContext, optimize
from yota.ir.passes.plan_memory import VIEW_OPS


class Arena:
    """Runs ``fn`` keeping each value with a buffer in that buffer's bytes; views are
    re-read from their buffer each time they are used."""

    def __init__(self, fn: Function, plan: MemoryPlan) -> None:
        self.fn, self.plan = fn, plan
        self.buffers = [np.zeros(n, np.uint8) for n in plan.buffers]
        self.buffer = plan.buffer_of(fn)
        self.defs = {r: op for op in fn.ops for r in op.results}
        self.env: dict[Value, np.ndarray] = {}

    def is_view(self, v: Value) -> bool:
        """``v`` is stored as a view of its operand (no bytes of its own)."""
        op = self.defs.get(v)
        b = self.buffer.get(v, -1)
        return op is not None and op.name in VIEW_OPS and v not in self.fn.outputs and (
            b == -1 or b == self.buffer.get(op.operands[0], -2))

    def read(self, v: Value) -> np.ndarray:
        if self.is_view(v):
            op = self.defs[v]
            return self.compute(op, [self.read(op.operands[0])])
        b = self.buffer.get(v, -1)
        if b >= 0:
            raw = self.buffers[b][:v.type.nbytes]
            return raw.view(v.dtype).reshape(v.shape).copy()
        return self.env[v]

    def compute(self, op: Any, xs: list[np.ndarray]) -> Any:
        if get_opdef(op.name).calls:
            return run(self.fn.callees[op.attrs["callee"]], *xs)
        with np.errstate(all="ignore"):
            out = get_opdef(op.name).impl(*xs, **op.attrs)
        return np.asarray(out).astype(op.results[0].dtype) if len(op.results) == 1 else out

    def write(self, v: Value, value: Any) -> None:
        if self.is_view(v):
            return
        value = np.ascontiguousarray(np.asarray(value).astype(v.dtype).reshape(v.shape))
        b = self.buffer.get(v, -1)
        if b >= 0:
            self.buffers[b][:v.type.nbytes] = value.view(np.uint8).reshape(-1)
        else:
            self.env[v] = value

    def __call__(self, *args: np.ndarray) -> list[np.ndarray]:
        self.env.update(zip(self.fn.inputs, args, strict=True))
        for op in self.fn.ops:
            if op.name == "guard":
                continue
            xs = [self.read(v) for v in op.operands]
            out = self.compute(op, xs)
            outs = out if len(op.results) != 1 else [out]
            for r, val in zip(op.results, outs, strict=True):
                self.write(r, val)
        return [self.read(v) for v in self.fn.outputs]


def planned(fn: Function, **opts: Any) -> tuple[Function, MemoryPlan]:
    g = optimize(fn, ctx=PassContext(reorder_matmul=False, **opts))
    plan = MemoryPlan.of(g)
    assert plan is not None
    return g, plan


def test_plan_round_trips_through_text() -> None:
    g, plan = planned(mlp_loss(batch=4, sizes=(6, 5, 3)))
    assert MemoryPlan.of(parse(print_function(g))) == plan


def test_mlp_gradient_plan_reuses_memory() -> None:
    f = mlp_loss()
    g, plan = planned(vjp(f, list(range(6))))
    assert plan.live_bytes <= plan.peak_bytes < plan.total_bytes
    args = example_inputs(f, np.random.default_rng(0))
    assert precision.mismatch(g, args, Arena(g, plan)(*args), run(g, *args),
                              same_impl=True) is None


def test_stale_plan_is_not_read() -> None:
    g, _ = planned(mlp_loss(batch=4, sizes=(6, 5, 3)))
    assert MemoryPlan.of(g.replace(ops=g.ops[:-1])) is None


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_run_correctly_in_their_planned_buffers(chunk: int) -> None:
    for seed in range(chunk * 60, (chunk + 1) * 60):
        fn, args = random_program(np.random.default_rng(seed))
        g, plan = planned(fn)
        try:
            want = run(g, *args)
        except GuardFailed:
            continue
        # matrix products and sums may round differently in other buffers (BLAS kernels
        # and NumPy's pairwise sums depend on layout); everything else bit for bit
        msg = precision.mismatch(g, args, Arena(g, plan)(*args), want, same_impl=True)
        assert msg is None, f"seed {seed}: {msg}"
        assert plan.peak_bytes <= plan.total_bytes and plan.live_bytes <= plan.total_bytes


def test_a_pass_that_changes_ops_drops_the_plan() -> None:
    g, _ = planned(mlp_loss(batch=4, sizes=(6, 5, 3)))
    assert MemoryPlan.of(optimize(g, ["cse"])) is not None  # nothing changed: kept
    dead = make_op("neg", [g.inputs[0]])
    assert MemoryPlan.of(optimize(g.replace(ops=[*g.ops, dead]), ["dce"])) is None
