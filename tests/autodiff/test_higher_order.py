"""Gradients of gradients: yota.grad (and trace, compile, simplegrad) called inside a
function that Yota is tracing traces through; the nested program is inlined into the
enclosing one and differentiated again, compiled natively.

Finite differences of first derivatives are central differences in float64 with step
1e-5: their truncation error is O(eps^2 * f''') ~ 1e-10 relative to the smooth functions
used here and their rounding error ~ 1e-16 / 1e-5 = 1e-11, so 1e-6 relative is a safe
bound that still catches any wrong term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota
from yota.grad import variants_of

BACKENDS = ["interp", "llvm"]
EPS = 1e-5


def d(f: Any, backend: str) -> Any:
    """The derivative of scalar function ``f`` of one float, by nested yota.grad."""
    return lambda x: yota.grad(f, x, backend=backend)[1][0]


def fd(f: Any, x: Any, eps: float = EPS) -> Any:
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def program_of(f: Any) -> Any:
    """The compiled program yota.grad made last for ``f`` (its code)."""
    return list(variants_of(f).values())[-1].programs[0]


# -- Hessian-vector products --------------------------------------------------------------
def loss(x: Any) -> Any:
    A = np.array([[1.0, -0.5, 0.2], [0.3, 0.8, -1.1]])
    return np.sum(np.tanh(A @ x) ** 2) + np.sum(x ** 4) / 4 + np.sum(np.sin(x) * x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hvp_matches_finite_differences_of_gradients(backend: str) -> None:
    rng = np.random.default_rng(0)
    x, v = rng.normal(size=3), rng.normal(size=3)

    def hvp_loss(x: Any, v: Any) -> Any:
        return np.sum(yota.grad(loss, x)[1][0] * v)

    val, g = yota.grad(hvp_loss, x, v, backend=backend)
    grad = lambda x: yota.grad(loss, x, backend=backend)[1][0]
    expect = (grad(x + EPS * v) - grad(x - EPS * v)) / (2 * EPS)
    np.testing.assert_allclose(g[0], expect, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(g[1], grad(x), rtol=1e-12)  # d/dv <grad, v> = grad, exact
    np.testing.assert_allclose(val, grad(x) @ v, rtol=1e-12)
    if backend == "llvm":
        assert type(program_of(hvp_loss).exe).__module__.startswith("yota.backends.llvm")


def test_hvp_one_liner_from_the_issue() -> None:
    f = lambda x: np.sum(x ** 3)
    x, v = np.array([1.0, 2.0, -0.5]), np.array([0.3, -1.0, 2.0])
    val, g = yota.grad(lambda x, v: np.sum(yota.grad(f, x)[1][0] * v), x, v)
    np.testing.assert_allclose(g[0], 6 * x * v)
    np.testing.assert_allclose(g[1], 3 * x ** 2)


# -- second and third derivatives of scalar functions -------------------------------------
def exp_log(x: Any) -> Any:
    return np.exp(x) * np.log(x)


CLOSED_FORMS = {  # f, f', f'', f''' at x
    "cube": (lambda x: x ** 3, lambda x: 3 * x ** 2, lambda x: 6 * x, lambda x: 6.0),
    "sin": (np.sin, np.cos, lambda x: -np.sin(x), lambda x: -np.cos(x)),
    "exp_log": (exp_log, lambda x: np.exp(x) * (np.log(x) + 1 / x),
                lambda x: np.exp(x) * (np.log(x) + 2 / x - 1 / x ** 2),
                lambda x: np.exp(x) * (np.log(x) + 3 / x - 3 / x ** 2 + 2 / x ** 3)),
    "exp_of_log": (lambda x: np.exp(np.log(1 + x * x)), lambda x: 2 * x, lambda x: 2.0,
                   lambda x: 0.0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_second_and_third_derivatives(backend: str, name: str) -> None:
    f, f1, f2, f3 = CLOSED_FORMS[name]
    d1 = d(f, backend)
    d2 = d(d1, backend)
    d3 = d(d2, backend)
    for x in (0.7, 1.3):
        np.testing.assert_allclose(d1(x), f1(x), rtol=1e-12)
        np.testing.assert_allclose(d2(x), f2(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(d3(x), f3(x), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_of_arrays_elementwise(backend: str) -> None:
    x = np.array([0.4, 1.1, 2.0])
    g1 = lambda x: np.sum(yota.grad(lambda y: np.sum(exp_log(y)), x)[1][0])
    g2 = yota.grad(g1, x, backend=backend)[1][0]  # d/dx_i sum_j f'(x_j) = f''(x_i)
    np.testing.assert_allclose(g2, CLOSED_FORMS["exp_log"][2](x), rtol=1e-12)


@dataclass
class TanhMLP:
    W1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray


def mlp(m: TanhMLP, x: Any) -> Any:
    return np.sum(m.w2 * np.tanh(m.W1 * x + m.b1))  # a scalar function of the float x


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_of_a_tanh_mlp(backend: str) -> None:
    rng = np.random.default_rng(1)
    m = TanhMLP(rng.normal(size=8), rng.normal(size=8), rng.normal(size=8))
    d1 = lambda x: yota.grad(mlp, m, x, backend=backend)[1][1]
    d2 = lambda x: yota.grad(lambda x: yota.grad(mlp, m, x)[1][1], x, backend=backend)[1][0]
    d3 = lambda x: yota.grad(
        lambda x: yota.grad(lambda x: yota.grad(mlp, m, x)[1][1], x)[1][0], x,
        backend=backend)[1][0]
    for x in (-0.3, 0.9):
        np.testing.assert_allclose(d2(x), fd(d1, x), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(d3(x), fd(d2, x), rtol=1e-6, atol=1e-9)
    # closed form: f'' = sum w2 * W1^2 * (-2 t (1 - t^2)), t = tanh(W1 x + b1)
    t = np.tanh(m.W1 * 0.5 + m.b1)
    np.testing.assert_allclose(d2(0.5), np.sum(m.w2 * m.W1 ** 2 * -2 * t * (1 - t * t)),
                               rtol=1e-12)


# -- a WGAN-GP gradient penalty -------------------------------------------------------------
@dataclass
class Critic:
    W: np.ndarray
    b: np.ndarray
    w: np.ndarray


def critic(D: Critic, x: Any) -> Any:
    return np.sum(D.w * np.tanh(D.W @ x + D.b))


def penalty(D: Critic, x: Any) -> Any:
    gx = yota.grad(critic, D, x)[1][1]
    return (np.sqrt(np.sum(gx * gx)) - 1.0) ** 2


def penalty_closure(D: Critic, x: Any) -> Any:  # the critic closes over the weights
    gx = yota.grad(lambda x: critic(D, x), x)[1][0]
    return (np.sqrt(np.sum(gx * gx)) - 1.0) ** 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pen", [penalty, penalty_closure])
def test_gradient_penalty_wrt_critic_weights(backend: str, pen: Any) -> None:
    rng = np.random.default_rng(2)
    D = Critic(rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=5))
    x = rng.normal(size=3)
    val, g = yota.grad(pen, D, x, backend=backend)
    assert set(g.flat[0]) == {("W",), ("b",), ("w",)}
    np.testing.assert_allclose(val, pen(D, x), rtol=1e-12)
    assert check_grad(pen, [D, x], g, eps=1e-6, rtol=1e-6) == 4


# -- a meta-learning inner step ----------------------------------------------------------------
def train_loss(theta: Any, X: Any, y: Any) -> Any:
    return np.mean((np.tanh(X @ theta) - y) ** 2)


def meta_loss(theta: Any, alpha: float, Xt: Any, yt: Any, Xv: Any, yv: Any) -> Any:
    inner = theta - alpha * yota.grad(train_loss, theta, Xt, yt)[1][0]  # one SGD step
    return train_loss(inner, Xv, yv)


@pytest.mark.parametrize("backend", BACKENDS)
def test_meta_learning_inner_sgd_step(backend: str) -> None:
    rng = np.random.default_rng(3)
    theta = rng.normal(size=4)
    Xt, yt, Xv, yv = rng.normal(size=(6, 4)), rng.normal(size=6), rng.normal(size=(5, 4)), \
        rng.normal(size=5)
    args = [theta, 0.3, Xt, yt, Xv, yv]
    val, g = yota.grad(meta_loss, *args, backend=backend)
    np.testing.assert_allclose(val, meta_loss(*args), rtol=1e-12)
    assert isinstance(g[1], float)  # the step size gets a gradient too
    assert check_grad(meta_loss, args, g, eps=1e-6, rtol=1e-6) == 6


# -- the other entry points, guards and errors -------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_trace_compile_and_simplegrad_trace_through(backend: str) -> None:
    x = np.array([0.3, -1.2])
    cf = yota.compile(lambda x: np.tanh(x) * 2.0, x)
    sg = yota.simplegrad(lambda x: np.sum(np.sin(x)), x)
    t = np.tanh(x)
    g = yota.grad(lambda x: np.sum(cf(x) ** 2), x, backend=backend)[1][0]
    np.testing.assert_allclose(g, 8 * t * (1 - t * t), rtol=1e-12)
    g = yota.grad(lambda x: np.sum(sg(x)[1]), x, backend=backend)[1][0]
    np.testing.assert_allclose(g, -np.sin(x), rtol=1e-12)
    g = yota.grad(lambda x: np.sum(yota.trace(lambda y: y * y, x)[0]), x, backend=backend)
    np.testing.assert_allclose(g[1][0], 2 * x)
    sq = lambda x: np.sum(yota.simplegrad(lambda y: np.sum(y ** 3), x)(x)[1])
    np.testing.assert_allclose(yota.grad(sq, x, backend=backend)[1][0], 6 * x)
    cube = lambda x: np.sum(yota.compile(lambda y: y ** 3, x)(x))
    np.testing.assert_allclose(yota.grad(cube, x, backend=backend)[1][0], 3 * x * x)


def branchy(x: Any) -> Any:
    if np.sum(x) > 0:
        return np.sum(x ** 3)
    return np.sum(np.sin(x))


def branchy_hvp(x: Any, v: Any) -> Any:
    return np.sum(yota.grad(branchy, x)[1][0] * v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nested_guard_is_a_guard_of_the_enclosing_program(backend: str) -> None:
    v = np.array([1.0, 2.0])
    up, down = np.array([0.5, 1.0]), np.array([-0.5, -1.0])
    yota.stats.reset()
    np.testing.assert_allclose(yota.grad(branchy_hvp, up, v, backend=backend)[1][0],
                               6 * up * v)
    g = yota.grad(branchy_hvp, down, v, backend=backend)  # the inner branch flips
    np.testing.assert_allclose(g[1][0], -np.sin(down) * v, rtol=1e-12)
    assert yota.stats.guard_failures == 1
    assert [op.name for op in g[1].tape.ops].count("guard") == 1
    before = yota.stats.traces
    yota.grad(branchy_hvp, up, v, backend=backend)  # both variants are kept: no trace
    assert yota.stats.traces == before
    _, tape = yota.pipeline.trace_grad(branchy_hvp, (up, v))
    [guard] = tape.guards  # the nested tape's guard, with its line in branchy
    assert guard.loc is not None and guard.loc.func == "branchy"
    assert "grad(branchy)(%1)" in str(tape)


def test_nested_grad_returns_traced_values_and_has_aux() -> None:
    x = np.array([0.5, 2.0])

    def outer(x: Any) -> Any:
        (l, aux), g = yota.grad(lambda y: (np.sum(y ** 3), {"sq": y * y}), x, has_aux=True)
        assert isinstance(g[0], yota.tracer.Tracer)
        return l + np.sum(aux["sq"]) + np.sum(g[0])

    val, g = yota.grad(outer, x)
    np.testing.assert_allclose(val, np.sum(x ** 3) + np.sum(x * x) + np.sum(3 * x * x))
    np.testing.assert_allclose(g[0], 3 * x * x + 2 * x + 6 * x)


def test_random_draws_in_a_nested_grad_are_drawn_again_at_every_call() -> None:
    """The enclosing trace records the draw (as eager NumPy makes it); the nested program
    reads it as an input."""
    rng = np.random.default_rng(0)

    def noisy(x: Any) -> Any:
        return np.sum(x * x * rng.normal(size=x.shape))

    f = lambda x: np.sum(yota.grad(noisy, x)[1][0])
    expect = np.random.default_rng(0)
    x = np.array([1.0, 3.0])
    for _ in range(3):
        val, g = yota.grad(f, x)
        noise = expect.normal(size=2)
        np.testing.assert_allclose(g[0], 2 * noise, rtol=1e-12)
        np.testing.assert_allclose(val, np.sum(2 * x * noise), rtol=1e-12)


def test_no_tracer_outlives_a_nested_trace() -> None:
    x = np.array([0.5, 2.0])
    W = np.array([1.0, -1.0])

    def f(W: Any, x: Any) -> Any:  # the nested function closes over the traced W
        return np.sum(yota.grad(lambda y: np.sum(W * y ** 2), x)[1][0])

    val, g = yota.grad(f, W, x)
    np.testing.assert_allclose(g[0], 2 * x)
    nested = [e.extra for e in program_of(f).tape.entries
              if isinstance(e.extra, yota.tape.Inlined)]
    assert len(nested) == 1 and not nested[0].tape.foreign_tracers


def test_hvp_on_the_cuda_backend_emulated() -> None:
    """The nested program's kernels, compiled for CUDA and run on the CPU emulation of the
    kernels (as tests/backends/cuda/test_cuda_frontend.py does without a GPU)."""
    from yota.backends import cuda
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    reason = emulation_available()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("cupy", reason="CuPy is not installed (the cuda extra)")
    rng = np.random.default_rng(5)
    x, v = rng.normal(size=3), rng.normal(size=3)

    def hvp_loss(x: Any, v: Any) -> Any:
        return np.sum(yota.grad(loss, x)[1][0] * v)

    cuda.use_device(EmuDevice())
    try:
        _, g = yota.grad(hvp_loss, x, v, backend="cuda")
    finally:
        cuda.use_device(None)
    _, ref = yota.grad(hvp_loss, x, v, backend="interp")
    np.testing.assert_allclose(np.asarray(g[0]), ref[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(g[1]), ref[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closures_over_traced_values_with_plain_arguments(backend: str) -> None:
    """The nested call's arguments are plain arrays; only its closure holds traced values:
    those are inputs of the nested program, fed by the enclosing one."""
    W, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    tr = lambda W: np.sum(yota.trace(lambda y: W * y, y)[0])
    np.testing.assert_allclose(yota.grad(tr, W, backend=backend)[1][0], y)
    gr = lambda W: np.sum(yota.grad(lambda y: np.sum(W * y * y), y)[1][0])  # sum 2 W y
    np.testing.assert_allclose(yota.grad(gr, W, backend=backend)[1][0], 2 * y)
    _, tape = yota.pipeline.trace_grad(gr, (W,))
    [nested] = [e for e in tape.entries if isinstance(e.extra, yota.tape.Inlined)]
    assert len(nested.args) == 2  # y (a constant of the enclosing trace) and W


def test_nested_adjoints_name_the_nested_functions_lines() -> None:
    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * x)

    def hvp(x: Any, v: Any) -> Any:
        return np.sum(yota.grad(f, x)[1][0] * v)

    _, tape = yota.pipeline.trace_grad(hvp, (np.ones(3), np.ones(3)))
    locs = [op.loc or "" for op in yota.to_ir(tape).ops]
    line = f"test_higher_order.py:{f.__code__.co_firstlineno + 1}"
    assert f"{line} (nested adjoint via rule sin)" in locs
    assert not any(loc.startswith("adjoint of") for loc in locs)  # names of another program
