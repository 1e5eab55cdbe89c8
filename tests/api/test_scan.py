"""``yota.scan`` and ``yota.fori_loop``: the step traced once into one ``loop`` op.

- values and gradients equal the plain Python loop's (rolled by the compiler) and eager
  NumPy's, and finite differences, on the interpreter, llvm and mlir;
- the trace holds one step whatever the length; structures in the carry, xs and ys,
  reverse, length=, no xs, length 0, nested scans, jvp / vmap / compile through a scan;
- outside a trace it is the Python loop;
- mistakes get a YotaError that says what to change: a carry that changes type, a step
  that is not (carry, y), xs of unequal lengths, a Python decision that differs at a
  later step (naming it), random draws from the enclosing function's generator.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad
from support.mlir_cases import MISSING as MLIR_MISSING
from support.rnn_cases import rnn_args, rnn_loss, rnn_scan, source_line
from yota.ir.errors import TraceError, UnsupportedError, YotaError

import yota
from yota import pipeline

BACKENDS = ["interp", "llvm", "mlir"]
def backend_or_skip(backend: str) -> None:
    if backend == "mlir" and MLIR_MISSING:
        pytest.skip(f"the mlir backend needs {MLIR_MISSING}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_equals_the_python_loop_and_finite_differences(backend: str) -> None:
    backend_or_skip(backend)
    args = rnn_args(9)
    val, g = yota.grad(rnn_scan, *args, backend=backend, cache=False)
    val0, g0 = yota.grad(rnn_loss, *args, backend=backend, cache=False)
    # the same ops in the same order: only the backends' own reassociation may differ
    np.testing.assert_allclose(val, rnn_loss(*args), rtol=1e-13)
    np.testing.assert_allclose(val, val0, rtol=1e-13)
    for a, b in zip(g, g0, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    assert check_grad(rnn_scan, args, g) == 4


def test_scan_gradient_on_the_emulated_cuda_backend() -> None:
    """The cuda backend without a GPU: its kernels built as C++ for the CPU emulation."""
    from support.cuda_cases import emulator
    from yota.backends import cuda
    from yota.backends.cuda.emulate import emulation_available
    from yota.ir import run

    why = emulation_available()
    if why:
        pytest.skip(why)
    args = rnn_args(7)
    _, tape = pipeline.trace_grad(rnn_scan, args)
    fn = pipeline.grad_ir(tape)  # rolled, differentiated, optimized
    got = cuda.compile(fn, device=emulator([fn]))(*args)
    for a, b in zip(got, run(fn, *args), strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-13)


def test_the_step_is_traced_once_whatever_the_length() -> None:
    sizes = {}
    for steps in (3, 300):
        _, tape = pipeline.trace_grad(rnn_scan, rnn_args(steps))
        fn = pipeline.traced_ir(tape)
        (loop,) = [op for op in fn.ops if op.name == "loop"]
        assert loop.attrs["length"] == steps
        body = fn.callees[loop.attrs["callee"]]
        lines = {op.loc.rsplit(":", 1)[1] for op in body.ops if op.loc}
        step_lines = {source_line(rnn_scan, "h = np.tanh("), source_line(rnn_scan, "return h,")}
        assert lines == {str(n) for n in step_lines}  # the step's own lines
        sizes[steps] = len(tape.entries), len(pipeline.lower(tape).ops)
    assert sizes[3] == sizes[300]


def structured(W: Any, xs: Any, c0: Any) -> Any:
    def step(c: Any, x: Any) -> tuple[Any, Any]:
        h, s = c
        h = np.tanh(x["a"] + h @ W) * x["b"]
        return (h, s + np.sum(h)), {"h": h, "n": np.sum(h * h)}

    (h, s), ys = yota.scan(step, (c0, 0.0), xs)
    return np.sum(h) + s + np.sum(ys["h"]) + np.sum(ys["n"] ** 2)


def reversed_scan(W: Any, xs: Any) -> Any:
    def step(c: Any, x: Any) -> tuple[Any, Any]:
        c = np.sin(c @ W + x)
        return c, c[0]

    c, ys = yota.scan(step, np.ones(3), xs, reverse=True)
    return np.sum(ys * np.arange(1.0, 8.0)) + np.sum(c)


def fori(W: Any, xs: Any) -> Any:
    return np.sum(yota.fori_loop(0, 7, lambda i, c: np.tanh(c @ W) + xs[i], np.zeros(3)))


def nested(W: Any, xs: Any) -> Any:
    def outer(c: Any, x: Any) -> tuple[Any, None]:
        c2, _ = yota.scan(lambda d, y: (np.sin(d * y + c @ W), None), c, np.stack([x, x]))
        return c2, None

    c, _ = yota.scan(outer, np.ones(3), xs)
    return np.sum(c)


@dataclasses.dataclass
class State:
    h: Any
    count: Any


def dataclass_and_dict(W: Any, xs: Any) -> Any:
    """A dataclass carry, a dict carried with its keys returned in another order, a Python
    int counted in the carry, and a y that holds a constant."""
    def step(c: Any, x: Any) -> tuple[Any, Any]:
        s, d = c
        d = {"b": d["b"] * 0.5 + np.sum(x), "a": np.tanh(d["a"] + x @ W)}
        return (State(np.sin(s.h) + x, s.count + 1), d), (0.0, s.h[0])

    (s, d), (zeros, firsts) = yota.scan(step, (State(np.zeros(3), 0),
                                              {"a": np.ones(3), "b": 1.0}), xs)
    return np.sum(s.h) * s.count + np.sum(d["a"]) + d["b"] + np.sum(zeros) + np.sum(firsts)


def no_xs(W: Any) -> Any:
    c, ys = yota.scan(lambda c, _: (np.cos(c @ W), np.sum(c)), np.ones(3), None, length=5)
    return np.sum(c) + np.sum(ys)


CASES = {"structured": structured, "reverse": reversed_scan, "fori_loop": fori,
         "nested": nested, "no_xs": no_xs, "dataclass_and_dict": dataclass_and_dict}
FLOAT_LEAVES = {"structured": 4, "no_xs": 1}  # the others: W and xs


def case_args(name: str) -> list[Any]:
    rng = np.random.default_rng(5)
    W = rng.standard_normal((3, 3)) * 0.5
    xs = rng.standard_normal((7, 3))
    if name == "structured":
        return [W, {"a": xs, "b": rng.standard_normal(7)}, rng.standard_normal(3)]
    return [W] if name == "no_xs" else [W, xs]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_structures_reverse_nesting_and_fori_loop(name: str, backend: str) -> None:
    """(``structured`` keeps a step output that is a reshape of another while a sum of
    products reads it: the loops pass once read that output before making it.)"""
    backend_or_skip(backend)
    f, args = CASES[name], case_args(name)
    val, g = yota.grad(f, *args, backend=backend, cache=False)
    np.testing.assert_allclose(val, f(*args), rtol=1e-12)  # eager: the Python loop
    assert check_grad(f, args, g) == FLOAT_LEAVES.get(name, 2)


def test_outside_a_trace_scan_is_the_python_loop() -> None:
    xs = np.arange(12.0).reshape(4, 3)
    carry, ys = yota.scan(lambda c, x: (c + x, {"p": c * x, "s": np.sum(x)}), np.ones(3), xs)
    want_c, want_p = np.ones(3), []
    for x in xs:
        want_p.append(want_c * x)
        want_c = want_c + x
    np.testing.assert_array_equal(carry, want_c)
    np.testing.assert_array_equal(ys["p"], np.stack(want_p))
    np.testing.assert_array_equal(ys["s"], xs.sum(axis=1))
    c, ys = yota.scan(lambda c, x: (c * 2.0, c), 1.0, None, length=3, reverse=True)
    assert c == 8.0 and list(ys) == [4.0, 2.0, 1.0]
    c, ys = yota.scan(lambda c, x: (c + x, x[:2] * c[:2]), np.zeros(3), np.zeros((0, 3)))
    np.testing.assert_array_equal(c, np.zeros(3))
    assert ys.shape == (0, 2) and ys.dtype == np.float64
    assert yota.fori_loop(2, 5, lambda i, c: c + i, 0) == 9


def test_a_python_int_in_the_carry_is_carried_as_an_array() -> None:
    def f(w: Any) -> Any:
        n, acc = yota.fori_loop(0, 4, lambda i, c: (c[0] + 1, c[1] * w + i), (0, np.ones(2)))
        return np.sum(acc) * n

    w = np.array([0.5, 2.0])
    val, g = yota.grad(f, w, cache=False)
    assert val == f(w)  # the same ops: 4 * sum of w**4 + i * w**(3-i) summed
    assert check_grad(f, [w], g) == 1


def test_a_scan_of_length_zero_in_a_trace() -> None:
    def f(w: Any, xs: Any) -> Any:
        c, ys = yota.scan(lambda c, x: (c * w + x, np.sum(x * w)), np.ones(2), xs)
        return np.sum(c) + np.sum(ys)

    w, xs = np.array([2.0, 3.0]), np.zeros((0, 2))
    val, (gw, gxs) = yota.grad(f, w, xs, cache=False)
    assert val == 2.0 and gxs.shape == (0, 2)
    np.testing.assert_array_equal(gw, np.zeros(2))


def test_transformations_through_a_scan() -> None:
    rng = np.random.default_rng(2)
    W, xs = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((6, 3))

    def f(W: Any, xs: Any) -> Any:
        c, ys = yota.scan(lambda c, x: (np.tanh(c @ W + x), np.sum(c)), np.zeros(3), xs)
        return np.sum(c) + np.sum(ys ** 2)

    np.testing.assert_allclose(yota.compile(f, W, xs)(W, xs), f(W, xs), rtol=1e-13)
    dW = rng.standard_normal((3, 3))
    _, tangent = yota.jvp(f, (W, xs), (dW, np.zeros_like(xs)))
    eps = 1e-6
    np.testing.assert_allclose(tangent, (f(W + eps * dW, xs) - f(W - eps * dW, xs)) / (2 * eps),
                               rtol=1e-6)
    batch = np.stack([xs, 2 * xs])
    np.testing.assert_allclose(yota.vmap(f, in_axes=(None, 0))(W, batch),
                               [f(W, xs), f(W, 2 * xs)], rtol=1e-13)


# -- mistakes -----------------------------------------------------------------------------------
def traced_scan(step: Any, init: Any, xs: Any = None, **kw: Any) -> None:
    def f(x: Any) -> Any:
        c, _ = yota.scan(step, init, xs if xs is not None else x, **kw)
        return np.sum(c[0] if isinstance(c, tuple) else c)

    yota.grad(f, np.ones((4, 3)), cache=False)


@pytest.mark.parametrize("step, init, xs, message", [
    (lambda c, x: (c + x, None), np.zeros(3, np.float32), None,
     r"returns a carry \(carry: f64\[3\]\) where it was given \(carry: f32\[3\]\).*astype"),
    (lambda c, x: (np.outer(c, x), None), np.zeros(3), None,
     r"returns a carry \(carry: f64\[3,3\]\) where it was given \(carry: f64\[3\]\)"),
    (lambda c, x: c + x, np.zeros(3), None, r"must return a pair \(carry, y\), got one value"),
    (lambda c, x: (c, None), np.zeros(3), (np.ones((4, 3)), np.ones((2, 3))),
     r"leading axes of xs \(and length=\) disagree: \[2, 4\]"),
    (lambda c, x: (c, None), np.zeros(3), (np.ones((4, 3)), np.float64(1.0)),
     r"needs a leading axis to scan over; found a scalar"),
])
def test_mistakes_say_what_to_change(step: Any, init: Any, xs: Any, message: str) -> None:
    with pytest.raises(YotaError, match=message):
        traced_scan(step, init, xs)


def test_a_decision_that_differs_at_a_later_step_is_named() -> None:
    def step(c: Any, x: Any) -> tuple[Any, None]:
        if np.sum(x) > 0:  # a guard in the body, taken at step 0 only
            c = c + x
        return c, None

    xs = np.array([[1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]])
    with pytest.raises(TraceError, match=r"step 'step' is traced once.*test_scan.py:\d+.*"
                                         r"in step 2 of a loop of 3.*np.where"):
        yota.grad(lambda xs: np.sum(yota.scan(step, np.zeros(2), xs)[0]), xs, cache=False)
    # where every step decides alike, the guard holds and the program runs
    val, _ = yota.grad(lambda xs: np.sum(yota.scan(step, np.zeros(2), xs)[0]), xs[:2],
                       cache=False)
    assert val == 4.0


def test_draws_from_the_enclosing_generator_are_refused() -> None:
    def f(xs: Any, rng: np.random.Generator) -> Any:
        c, _ = yota.scan(lambda c, x: (c + x * rng.standard_normal(3), None), np.zeros(3), xs)
        return np.sum(c)

    with pytest.raises(UnsupportedError, match=r"draws random numbers at test_scan.py:\d+.*"
                                               r"every step would get the first step's"):
        yota.grad(f, np.ones((4, 3)), np.random.default_rng(0), cache=False)

    def g(xs: Any) -> Any:
        c, _ = yota.scan(lambda c, x: (c + x * np.random.standard_normal(3), None),
                         np.zeros(3), xs)
        return np.sum(c)

    with pytest.raises(UnsupportedError, match="draws random numbers .*yota.scan"):
        yota.grad(g, np.ones((4, 3)), cache=False)


def test_fori_loop_bounds_must_be_ints_and_functions_callable() -> None:
    with pytest.raises(YotaError, match="lower and upper must be Python ints"):
        yota.fori_loop(0, 2.0, lambda i, c: c, 0.0)
    with pytest.raises(YotaError, match=r"yota.scan: the step must be a function "
                                        r"\(carry, x\) -> \(carry, y\), got a ndarray"):
        yota.scan(np.zeros(3), 0.0, np.ones(3))  # type: ignore[arg-type]
    with pytest.raises(YotaError, match=r"yota.fori_loop: the body must be a function "
                                        r"\(i, carry\) -> carry.*fori_loop\(lower, upper"):
        yota.fori_loop(0, 3, 0.0, lambda i, c: c)  # type: ignore[arg-type]


def test_loops_of_no_steps_run_no_body_where_they_need_not() -> None:
    a = np.zeros(0)
    body_runs = []

    def body(i: Any, c: Any) -> Any:
        body_runs.append(i)
        return c + a[i]

    assert yota.fori_loop(0, len(a), body, 0.0) == 0.0 and not body_runs
    val, (g,) = yota.grad(lambda w: np.sum(yota.fori_loop(3, 3, body, w)), np.ones(2),
                          cache=False)
    assert val == 2.0 and not body_runs
    np.testing.assert_array_equal(g, np.ones(2))
    # scan of no steps still needs its ys' shapes: the step runs once, on zeros
    step = lambda c, m: (np.linalg.solve(m, c), c)  # noqa: E731 - singular on zeros
    for run in (lambda: yota.scan(step, np.ones(2), np.zeros((0, 2, 2))),
                lambda: yota.grad(lambda c: np.sum(yota.scan(step, c, np.zeros((0, 2, 2)))[0]),
                                  np.ones(2), cache=False)):
        with pytest.raises(YotaError, match=r"a loop of no steps still runs its step once, "
                                            r"on zeros.*LinAlgError"):
            run()


def test_eager_scan_checks_every_step_returns_the_same_y() -> None:
    def step(c: Any, x: Any) -> tuple[Any, Any]:
        return c + 1, ({"a": x} if c == 0 else {"b": -x})

    with pytest.raises(YotaError, match=r"returns a y of another structure, dtype or shape at "
                                        r"step 1 \(y\.b: f64\[\]\) than at the first step "
                                        r"\(y\.a: f64\[\]\)"):
        yota.scan(step, 0, np.arange(3.0))


def test_a_python_float_carry_with_float32_steps_says_it_is_float64() -> None:
    xs, w = np.ones((3, 2), np.float32), np.float32(2.0)
    step = lambda c, x: (c + np.sum(x * w), None)  # noqa: E731
    for run in (lambda: yota.scan(step, 0.0, xs),
                lambda: yota.grad(lambda xs: yota.scan(step, 0.0, xs)[0], xs, cache=False)):
        with pytest.raises(YotaError, match=r"carry: f32\[\].*carry: f64\[\].*a Python float "
                                            r"in the carry is f64: start from np.float32"):
            run()
    c, _ = yota.scan(step, np.float32(0.0), xs)
    assert c == np.float32(12.0) and c.dtype == np.float32


def test_fori_loop_errors_name_the_body_and_a_pair_may_be_a_list() -> None:
    def body(i: Any, c: Any) -> Any:
        return c + i if i > 0 else c  # decided at i = 0 only

    with pytest.raises(TraceError, match=r"yota.fori_loop: the body 'body' is traced once"):
        yota.grad(lambda x: np.sum(yota.fori_loop(0, 3, body, x)), np.ones(2), cache=False)
    c, ys = yota.scan(lambda c, x: [c + x, c], 0.0, np.arange(3.0))
    assert c == 3.0 and list(ys) == [0.0, 0.0, 1.0]
