"""Loops: repeated steps of a traced program rolled into ``loop`` ops (``roll``), run and
differentiated on every backend, against the unrolled program and finite differences.

- rolling is exact: on the reference interpreter the rolled program gives the unrolled
  program's results bit for bit (random programs repeated as steps, the RNN);
- every backend runs loops (llvm and mlir here; the cuda backend in test_cuda_ops.py);
- gradients through loops equal the unrolled gradients (to rounding: sums of per-step
  cotangents associate differently) and finite differences;
- a Python loop given to yota.grad is compiled as one loop, with guards, random draws,
  writes and locations keeping their meaning; rolling costs work linear in the program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import irgen  # noqa: E402
from support.backend_cases import loop_programs, mismatch, rnn_steps  # noqa: E402
from support.gradcheck import check_grad  # noqa: E402
from support.mlir_cases import MISSING as MLIR_MISSING  # noqa: E402
from support.rnn_cases import rnn_args, rnn_loss, source_line  # noqa: E402
from yota.backends import llvm  # noqa: E402
from yota.ir import Builder, Function, GuardFailed, Value, run  # noqa: E402
from yota.ir.autodiff import vjp  # noqa: E402
from yota.ir.passes import (  # noqa: E402
    PassContext,
    optimize,
    roll_steps,  # noqa: E402
)
from yota.ir.passes.roll import roll  # noqa: E402

import yota  # noqa: E402
from yota import pipeline  # noqa: E402

CTX = PassContext(roll_min_saved=1)


def loops_of(fn: Function) -> list[Any]:
    return [op for op in fn.ops if op.name == "loop"]


# -- random programs repeated as steps ---------------------------------------------------------
def repeated(rng: np.random.Generator, steps: int) -> tuple[Function, list[np.ndarray]]:
    """A random program run ``steps`` times, unrolled: each input that some output of the
    program matches in type is carried (the next step reads that output), the others
    are read by every step; the outputs are the last step's and the first output of
    every step, stacked."""
    step, data = irgen.random_program(rng, tame=True)
    b = Builder("repeated")
    b.callees.update(step.callees)
    env_in: list[Value] = [b.input(v.type, f"in{i}") for i, v in enumerate(step.inputs)]
    carry = {}
    for i, v in enumerate(step.inputs):
        same = [j for j, o in enumerate(step.outputs) if o.type == v.type]
        if same:
            carry[i] = same[int(rng.integers(len(same)))]
    firsts = []
    outs: list[Value] = []
    for _ in range(steps):
        outs = _inline(b, step, env_in)
        firsts.append(b.reshape(outs[0], shape=(1,) + outs[0].shape))
        env_in = [outs[carry[i]] if i in carry else v for i, v in enumerate(env_in)]
    return b.build(outs + [b.concatenate(*firsts, axis=0)]), data


def _inline(b: Builder, fn: Function, args: list[Value]) -> list[Value]:
    env = dict(zip(fn.inputs, args, strict=True))
    for op in fn.ops:
        new = op.replace(operands=[env[v] for v in op.operands],
                         results=[Value(r.type) for r in op.results])
        b.append(new)
        env.update(zip(op.results, new.results, strict=True))
    return [env[v] for v in fn.outputs]


def outcome(fn: Function, args: list[np.ndarray]) -> list[np.ndarray] | str:
    try:
        return run(fn, *args)
    except GuardFailed as e:
        return str(e)


@pytest.mark.parametrize("seed", range(24))
def test_rolled_random_programs_equal_unrolled_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    fn, args = repeated(rng, int(rng.integers(3, 7)))
    rolled = roll(fn, CTX)
    if any(op.name not in roll.__globals__["DATA_OPS"] and op.name != "const"
           for op in fn.ops):
        assert loops_of(rolled), f"nothing rolled in\n{fn}"
    want, got = outcome(fn, args), outcome(rolled, args)
    if isinstance(want, str):
        assert got == want
        return
    assert not isinstance(got, str), got
    assert irgen.same_results(want, got) is None


@pytest.mark.parametrize("seed", range(8))
def test_rolled_random_programs_on_llvm(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    fn, args = repeated(rng, 4)
    rolled = optimize(roll(fn, CTX))
    try:
        want = run(fn, *args)
    except GuardFailed:
        with pytest.raises(GuardFailed):
            llvm.compile(rolled)(*args)
        return
    msg = mismatch(fn, args, llvm.compile(rolled)(*args), want)
    assert msg is None, msg


# -- the shared loop programs, on llvm and mlir -------------------------------------------------
BACKENDS: dict[str, Callable[[Function], Callable[..., list[Any]]]] = {"llvm": llvm.compile}
if MLIR_MISSING is None:
    from yota.backends import mlir

    BACKENDS["mlir"] = mlir.compile


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_loop_programs_match_the_interpreter(backend: str) -> None:
    rng = np.random.default_rng(1)
    for label, fn in loop_programs():
        args = irgen.example_inputs(fn, rng)
        want = run(fn, *args)
        msg = mismatch(fn, args, BACKENDS[backend](fn)(*args), want)
        assert msg is None, f"{label}: {msg}"


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_a_failing_guard_in_a_loop_names_its_steps(backend: str) -> None:
    fn = dict(loop_programs())["loop_nested_guard"]
    x = np.array([60.0, 50.0])  # the reverse outer loop's first step is step 1
    exe = llvm.compile(fn) if backend == "llvm" else (lambda *a: run(fn, *a))
    with pytest.raises(GuardFailed) as e:
        exe(x)
    assert e.value.steps == (1, 0)
    assert str(e.value).endswith("(in step 0 of a loop of 3) (in step 1 of a loop of 2)")


# -- gradients through loops -----------------------------------------------------------------------
def test_rolled_rnn_gradient_equals_the_unrolled_one() -> None:
    fn = rnn_steps(6)
    rolled = roll(fn, PassContext(roll_min_saved=4))
    assert len(loops_of(rolled)) == 1 and loops_of(rolled)[0].attrs["length"] == 6
    args = irgen.example_inputs(fn, np.random.default_rng(2))
    want = run(vjp(fn), *args)
    for g in (vjp(rolled), optimize(vjp(rolled))):
        got = run(g, *args)
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13)
    got = llvm.compile(optimize(vjp(rolled)))(*args)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_second_order_through_a_loop() -> None:
    """The gradient program (a forward and a reverse loop) differentiated again."""
    b = Builder("f")
    x = b.input(irgen.TensorType("f64", (3,)), "x")
    h = x
    for _ in range(5):
        h = b.sin(b.mul(h, x))
    fn = b.build([b.sum(h, axes=(0,))])
    rolled = roll(fn, CTX)
    assert loops_of(rolled)
    g = vjp(rolled)
    dot = Builder("dot")
    xx = dot.input(g.inputs[0].type, "x")
    gx = dot.call(g, xx)[1]
    second = dot.build([dot.sum(dot.mul(gx, dot.const(1.0, "f64", (3,))), axes=(0,))])
    gg = vjp(optimize(second, ["inline"]))
    x0 = np.array([0.3, -0.7, 1.1])
    h_fn = vjp(fn)
    eps = 1e-6
    num = [(run(h_fn, x0 + eps * e)[1].sum() - run(h_fn, x0 - eps * e)[1].sum()) / (2 * eps)
           for e in np.eye(3)]
    np.testing.assert_allclose(run(gg, x0)[1], num, rtol=1e-6, atol=1e-8)


# -- Python loops through yota.grad -----------------------------------------------------------------
def test_a_python_loop_is_compiled_as_one_loop_op() -> None:
    _, tape = pipeline.trace_grad(rnn_loss, rnn_args(40))
    fn = pipeline.traced_ir(tape)
    assert len(pipeline.lower(tape).ops) > 300 and len(fn.ops) < 20
    (loop,) = loops_of(fn)
    assert loop.attrs["length"] == 40
    body = fn.callees[loop.attrs["callee"]]
    lines = {op.loc.rsplit(":", 1)[1] for op in body.ops if op.loc}
    step = {source_line(rnn_loss, "h = np.tanh("), source_line(rnn_loss, "total = total +")}
    assert lines == {str(n) for n in step}  # one line number per op of the body


def test_grad_of_a_python_loop_matches_unrolled_and_finite_differences(
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = rnn_args(12)
    val, g = yota.grad(rnn_loss, *args, cache=False)
    monkeypatch.setenv("YOTA_ROLL", "0")
    val0, g0 = yota.grad(lambda *a: rnn_loss(*a), *args, cache=False)
    np.testing.assert_allclose(val, val0, rtol=1e-13)
    for a, b in zip(g, g0, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    check_grad(rnn_loss, args, g)


def test_guards_in_a_loop_retrace_when_a_step_takes_the_other_branch() -> None:
    def f(x: np.ndarray, ws: np.ndarray) -> Any:
        h = x
        for t in range(ws.shape[0]):
            h = np.sin(h + ws[t])
            if np.sum(ws[t]) > -100.0:  # taken in every step: a guard in the body
                h = h * 0.5
        return np.sum(h * h)

    rng = np.random.default_rng(3)
    x, ws = rng.standard_normal(4), rng.standard_normal((30, 4))
    _, tape = pipeline.trace_grad(f, [x, ws])
    fn = pipeline.traced_ir(tape)
    body = fn.callees[loops_of(fn)[0].attrs["callee"]]
    assert any(op.name == "guard" for op in body.ops)
    val, _ = yota.grad(f, x, ws)
    np.testing.assert_allclose(val, f(x, ws), rtol=1e-13)
    before = yota.stats.traces, yota.stats.guard_failures
    ws2 = ws.copy()
    ws2[17] = -1000.0  # step 17 takes the other branch
    val2, g2 = yota.grad(f, x, ws2)
    assert yota.stats.traces == before[0] + 1
    assert yota.stats.guard_failures == before[1] + 1
    np.testing.assert_allclose(val2, f(x, ws2), rtol=1e-13)
    check_grad(f, [x, ws2], g2)


def test_random_draws_in_a_loop_are_drawn_as_numpy_draws_them() -> None:
    def f(w: np.ndarray, rng: np.random.Generator) -> Any:
        h = np.zeros(3)
        for _ in range(20):
            h = np.tanh(h * w + rng.standard_normal(3))
        return np.sum(h)

    w = np.array([0.5, -0.3, 0.9])
    val, _ = yota.grad(f, w, np.random.default_rng(7))
    assert val == pytest.approx(f(w, np.random.default_rng(7)), rel=1e-13)
    val2, _ = yota.grad(f, w, np.random.default_rng(8))
    assert val2 == pytest.approx(f(w, np.random.default_rng(8)), rel=1e-13)


def test_layers_of_equal_shape_roll_with_their_weights_stacked() -> None:
    def mlp(ws: list[np.ndarray], x: np.ndarray) -> Any:
        for w in ws:
            x = np.tanh(x @ w + 0.1)
        return np.sum(x ** 2)

    rng = np.random.default_rng(4)
    ws = [rng.standard_normal((6, 6)) * 0.4 for _ in range(12)]
    x = rng.standard_normal((2, 6))
    _, tape = pipeline.trace_grad(mlp, [ws, x])
    fn = pipeline.traced_ir(tape)
    assert loops_of(fn) and len(fn.ops) < 40
    val, g = yota.grad(mlp, ws, x)
    assert val == pytest.approx(mlp(ws, x), rel=1e-13)
    check_grad(mlp, [ws, x], g)


def test_overlapping_windows_are_not_rolled() -> None:
    """Steps reading ``x[k:k+n]`` for each ``k`` overlap: stacking their windows for a
    loop would copy ``x`` once per step, so they stay unrolled (and fuse); windows
    ``xs[t]`` that tile the array are a view and roll."""
    n, m = 40, 48

    def shifted(x: np.ndarray, w: np.ndarray) -> Any:
        y = x[0:n] * w[0]
        for k in range(1, m):
            y = y + np.sin(x[k:k + n] * w[k])
        return np.sum(y)

    def tiled(x: np.ndarray, w: np.ndarray) -> Any:
        y = x[0:n] * w[0]
        for k in range(1, m):
            y = y + np.sin(x[k * n:(k + 1) * n] * w[k])
        return np.sum(y)

    rng = np.random.default_rng(5)
    for f, size, rolls in [(shifted, n + m, False), (tiled, n * m, True)]:
        x, w = rng.standard_normal(size), rng.standard_normal(m)
        _, tape = pipeline.trace_grad(f, [x, w])
        assert bool(loops_of(pipeline.traced_ir(tape))) == rolls, f.__name__
        val, g = yota.grad(f, x, w)
        assert val == pytest.approx(f(x, w), rel=1e-12)
        check_grad(f, [x, w], g)


def test_states_stacked_after_the_loop() -> None:
    def f(w: np.ndarray, x0: np.ndarray) -> Any:
        h, hs = x0, []
        for _ in range(16):
            h = np.cos(h * w)
            hs.append(h)
        states = np.stack(hs)
        return np.sum(states * np.arange(16.0)[:, None])

    w, x0 = np.array([0.3, 1.2, -0.7]), np.array([1.0, 0.5, -0.2])
    val, g = yota.grad(f, w, x0)
    assert val == pytest.approx(f(w, x0), rel=1e-13)
    check_grad(f, [w, x0], g)


def test_loops_in_loops() -> None:
    def f(a: np.ndarray, x: np.ndarray) -> Any:
        for _ in range(6):
            for _ in range(20):
                x = np.sin(x * a)
            x = np.exp(-x)
        return np.sum(x)

    a, x = np.array([0.9, 1.3, -0.4]), np.array([0.2, -0.1, 0.7])
    _, tape = pipeline.trace_grad(f, [a, x])
    fn = pipeline.traced_ir(tape)
    inner = [op for b in fn.all_callees().values() for op in b.ops if op.name == "loop"]
    assert loops_of(fn) and inner
    val, g = yota.grad(f, a, x)
    assert val == pytest.approx(f(a, x), rel=1e-13)
    check_grad(f, [a, x], g)


def test_writes_into_a_buffer_step_by_step() -> None:
    """W7's pattern: states[:, t + 1] = tanh(...) into a buffer the function made."""
    def f(w: np.ndarray, u: np.ndarray, xs: np.ndarray) -> Any:
        states = np.zeros((xs.shape[1], xs.shape[0] + 1, u.shape[0]))
        for t in range(xs.shape[0]):
            states[:, t + 1] = np.tanh(xs[t] @ w + states[:, t] @ u)
        return np.sum(states ** 2)

    rng = np.random.default_rng(5)
    w, u, xs = (rng.standard_normal((3, 4)) * 0.5, rng.standard_normal((4, 4)) * 0.5,
                rng.standard_normal((10, 2, 3)))
    _, tape = pipeline.trace_grad(f, [w, u, xs])
    fn = pipeline.traced_ir(tape)
    assert loops_of(fn) and [op.name for op in fn.ops].count("update_slice") <= 2
    val, g = yota.grad(f, w, u, xs)
    assert val == pytest.approx(f(w, u, xs), rel=1e-12)
    check_grad(f, [w, u, xs], g)


def test_simplegrad_writes_a_loop_as_a_for_loop() -> None:
    args = rnn_args(10)
    g = yota.simplegrad(rnn_loss, *args)
    assert "for _i in range(10):" in g.source and "for _i in range(10 - 1, -1, -1):" in \
        g.source
    val, *grads = g(*args)
    want_val, want = yota.grad(rnn_loss, *args)
    assert val == pytest.approx(want_val, rel=1e-13)
    for a, b in zip(grads, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


# -- the work of rolling ----------------------------------------------------------------------------
def test_rolling_costs_work_linear_in_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operands checked by ``roll``, counted: ten times the steps, about ten times the
    work (not a hundred)."""
    counted = [0]
    check = roll_steps.Steps._check_slot

    def counting(self: Any, *a: Any) -> bool:
        counted[0] += 1
        return check(self, *a)

    monkeypatch.setattr(roll_steps.Steps, "_check_slot", counting)
    work = []
    for steps in (100, 1000):
        counted[0] = 0
        rolled = roll(rnn_steps(steps), CTX)
        assert loops_of(rolled)[0].attrs["length"] == steps
        work.append(counted[0])
    assert work[1] <= 12 * work[0], work


# -- checkpointed loops -------------------------------------------------------------------------------
@pytest.mark.parametrize("steps,segment", [(23, True), (16, True), (9, 2), (30, 7)])
def test_checkpointed_gradient_equals_the_plain_one(steps: int, segment: Any) -> None:
    from yota.ir.autodiff.checkpoint import checkpoint_loops

    fn = roll(rnn_steps(steps), PassContext(roll_min_saved=4))
    ck = checkpoint_loops(fn, segment)
    bodies = [f for f in ck.all_callees().values() if f.attrs.get("checkpoint")]
    assert len(bodies) == 1
    args = irgen.example_inputs(fn, np.random.default_rng(steps))
    assert irgen.same_results(run(fn, *args), run(ck, *args)) is None
    want = run(vjp(fn), *args)
    for got in (run(vjp(ck), *args), llvm.compile(optimize(vjp(ck)))(*args)):
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-13)


def test_checkpointing_keeps_memory_of_order_sqrt_steps() -> None:
    """The memory plan's peak bytes of the gradient program: with checkpoints, what is
    kept per step is one carried value every sqrt(T) steps (and one segment's values)."""
    from yota.ir.autodiff.checkpoint import checkpoint_loops
    from yota.ir.passes.plan_memory import MemoryPlan

    peak = {}
    for steps in (100, 400):
        fn = roll(rnn_steps(steps), PassContext(roll_min_saved=4))
        for policy in (False, True):
            g = optimize(vjp(checkpoint_loops(fn, policy), [1, 2]))  # not xs: O(T) itself
            plan = MemoryPlan.of(g)
            assert plan is not None
            peak[steps, policy] = plan.peak_bytes
    assert peak[400, False] > 3.5 * peak[100, False]  # O(T)
    assert peak[400, True] < 2.5 * peak[100, True]  # O(sqrt(T)): twice the steps' root
    assert peak[400, True] < peak[400, False] / 3


def test_grad_checkpoint_option(monkeypatch: pytest.MonkeyPatch) -> None:
    args = rnn_args(20, seed=9)
    val, g = yota.grad(rnn_loss, *args)
    val2, g2 = yota.grad(rnn_loss, *args, checkpoint=True)
    val3, g3 = yota.grad(rnn_loss, *args, checkpoint=3)
    for v, gg in ((val2, g2), (val3, g3)):
        assert v == pytest.approx(val, rel=1e-13)
        for a, b in zip(g, gg, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-11, atol=1e-13)
    with pytest.raises(yota.YotaError, match="checkpoint must be"):
        yota.grad(rnn_loss, *args, checkpoint=0)


def test_checkpointed_gradient_of_a_long_step() -> None:
    """A step of 1,200 ops recomputed in the backward step (no recursion over the chain)."""
    from yota.ir.autodiff.checkpoint import checkpoint_loops

    b = Builder("long")
    x = b.input(irgen.TensorType("f64", (3,)), "x")
    a = b.input(irgen.TensorType("f64", (3,)), "a")
    kinds = np.random.default_rng(0).integers(0, 3, 600)  # no shorter period inside a step
    for _ in range(9):
        for k in kinds:
            x = b.emit(("sin", "cos", "tanh")[k], b.mul(x, a))
    fn = roll(b.build([b.sum(x, axes=(0,))]), PassContext(roll_min_saved=4))
    assert loops_of(fn) and loops_of(fn)[0].attrs["length"] == 9
    args = [np.array([0.3, -0.2, 0.9]), np.array([0.9, 1.1, 0.8])]
    want = run(vjp(fn), *args)
    got = run(vjp(checkpoint_loops(fn, 3)), *args)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
