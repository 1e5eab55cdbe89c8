"""Random numbers drawn inside a traced function behave as in NumPy: the same seed gives
the same sequence of values and gradients as eager NumPy over several calls, and leaves
the generators in the same state, for the module functions and for generators from an
argument, a closure, a global, an attribute or made inside the function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import yota

BACKENDS = ["interp", "llvm"]
CALLS = 4


def _eager_grad(f: Callable[..., Any], w: np.ndarray, reset: Callable[[], None],
                k: int) -> np.ndarray:
    """The k-th call's gradient by central differences, each evaluation replaying the
    draws of that call (the state is reset and k-1 calls' draws consumed first)."""
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e.flat[i] = 1e-6
        vals = []
        for s in (1, -1):
            reset()
            for _ in range(k):
                f(w)
            vals.append(float(f(w + s * e)))
        g.flat[i] = (vals[0] - vals[1]) / 2e-6
    return g


def _compare(f: Callable[..., Any], w: np.ndarray, reset: Callable[[], None],
             state: Callable[[], Any], backend: str, dynamic: bool = False) -> None:
    reset()
    eager = [float(f(w)) for _ in range(CALLS)]
    eager_state = state()
    reset()
    got = [yota.grad(f, w, backend=backend, dynamic=dynamic) for _ in range(CALLS)]
    assert [float(v) for v, _ in got] == pytest.approx(eager, rel=1e-12, abs=1e-12)
    assert _same_state(state(), eager_state)
    assert len({float(v) for v, _ in got}) == CALLS  # fresh numbers on every call
    for k in (0, CALLS - 1):
        np.testing.assert_allclose(got[k][1][0], _eager_grad(f, w, reset, k), rtol=1e-5,
                                   atol=1e-6)


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return all(_same_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


# -- the module functions (NumPy's global RandomState) ---------------------------------------
def _dropout(w: np.ndarray) -> Any:
    mask = np.random.rand(*w.shape) > 0.3
    return np.sum(np.tanh(w * mask / 0.7))


def _noise(w: np.ndarray) -> Any:
    return np.sum((w + 0.1 * np.random.standard_normal(w.shape)) ** 2)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [_dropout, _noise], ids=["dropout", "noise"])
def test_module_functions_draw_again_at_every_call(f: Any, backend: str, dynamic: bool) -> None:
    w = np.linspace(-1, 2, 6)
    _compare(f, w, lambda: np.random.seed(3), np.random.get_state, backend, dynamic)


def test_a_seed_inside_the_function_is_replayed() -> None:
    def f(w: np.ndarray) -> Any:
        np.random.seed(7)
        return np.sum(w * np.random.randn(3))

    w = np.ones(3)
    v1, _ = yota.grad(f, w)
    np.random.seed(1)
    v2, g2 = yota.grad(f, w)
    np.random.seed(7)
    assert g2[0].tolist() == np.random.randn(3).tolist() and float(v1) == float(v2)


# -- generators: argument, closure, global, attribute, made inside ---------------------------
def _reparam(w: np.ndarray, rng: np.random.Generator) -> Any:
    mu, log_sigma = w[:3], w[3:]
    z = mu + np.exp(log_sigma) * rng.standard_normal(3)  # a reparameterized sample
    return np.sum(z ** 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_generator_argument(backend: str) -> None:
    rng = np.random.default_rng(0)
    f = lambda w: _reparam(w, rng)  # noqa: E731 - eager reference with the same generator
    w = np.linspace(-0.5, 0.5, 6)

    def reset() -> None:
        rng.bit_generator.state = np.random.default_rng(0).bit_generator.state

    reset()
    eager = [float(f(w)) for _ in range(CALLS)]
    end = rng.bit_generator.state
    reset()
    got = [float(yota.grad(_reparam, w, rng, backend=backend)[0]) for _ in range(CALLS)]
    assert got == pytest.approx(eager, rel=1e-12)
    assert rng.bit_generator.state == end


CLOSURE_SEED = 11
GLOBAL_RNG = np.random.default_rng(5)


def _global_loss(w: np.ndarray) -> Any:
    return np.sum(w * GLOBAL_RNG.normal(0.0, 1.0, size=w.shape))


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_global_and_attribute_generators(backend: str) -> None:
    w = np.arange(4.0)
    rng = np.random.default_rng(CLOSURE_SEED)

    def closure_loss(w: np.ndarray) -> Any:
        return np.sum(w * rng.uniform(size=4))

    def reset_closure() -> None:
        rng.bit_generator.state = np.random.default_rng(CLOSURE_SEED).bit_generator.state

    _compare(closure_loss, w, reset_closure, lambda: rng.bit_generator.state, backend)

    def reset_global() -> None:
        GLOBAL_RNG.bit_generator.state = np.random.default_rng(5).bit_generator.state

    _compare(_global_loss, w, reset_global, lambda: GLOBAL_RNG.bit_generator.state, backend)

    class Dropout:
        def __init__(self) -> None:
            self.rng = np.random.default_rng(2)

        def __call__(self, x: np.ndarray) -> Any:
            return x * (self.rng.random(x.shape) > 0.5)

    layer = Dropout()

    def reset_layer() -> None:
        layer.rng.bit_generator.state = np.random.default_rng(2).bit_generator.state

    _compare(lambda w: np.sum(layer(w) ** 2), w, reset_layer,
             lambda: layer.rng.bit_generator.state, backend)


def test_a_generator_made_inside_with_a_seed_is_made_again() -> None:
    def f(w: np.ndarray) -> Any:
        g = np.random.default_rng(42)
        return np.sum(w * g.standard_normal(3))

    w = np.ones(3)
    _, g1 = yota.grad(f, w)
    _, g2 = yota.grad(f, w)
    assert g1[0].tolist() == g2[0].tolist() == np.random.default_rng(42).standard_normal(3).tolist()


def test_integer_draws_pick_a_batch() -> None:
    def f(X: np.ndarray) -> Any:
        idx = np.random.permutation(10)[:3]  # a random batch: indices into a traced array
        return np.sum(X[idx] ** 2)

    X = np.arange(20.0).reshape(10, 2)
    np.random.seed(0)
    eager = [float(f(X)) for _ in range(3)]
    np.random.seed(0)
    got = [yota.grad(f, X) for _ in range(3)]
    assert [float(v) for v, _ in got] == eager
    np.random.seed(0)
    for _, g in got:
        idx = np.random.permutation(10)[:3]
        want = np.zeros_like(X)
        want[idx] = 2 * X[idx]
        assert g[0].tolist() == want.tolist()


def test_a_guarded_draw_retraces_with_the_same_numbers() -> None:
    def f(w: np.ndarray) -> Any:
        if np.random.rand() < 0.5:  # a Python branch on a draw: a guard
            return np.sum(w * 2.0)
        return np.sum(w * w)

    np.random.seed(4)
    eager = [float(f(np.full(2, 3.0))) for _ in range(8)]
    np.random.seed(4)
    got = [float(yota.grad(f, np.full(2, 3.0))[0]) for _ in range(8)]
    assert got == eager and len(set(eager)) == 2


def test_a_draw_with_a_traced_array_argument_is_an_error() -> None:
    with pytest.raises(yota.TraceError, match="standard_normal"):
        yota.grad(lambda mu: np.sum(np.random.normal(mu, 1.0)), np.zeros(3))


def test_a_draw_that_bypasses_the_recording_is_an_error() -> None:
    from numpy.random import standard_normal

    with pytest.raises(yota.TraceError, match="cannot record"):
        yota.grad(lambda w: np.sum(w * standard_normal(2)), np.ones(2))


def test_the_tape_and_ir_show_the_draws() -> None:
    _, tape = yota.trace(_noise, np.ones(2))
    assert "random.standard_normal((2,))::f64[2]" in str(tape)
    assert '"random.standard_normal at' in str(yota.to_ir(tape))


def test_draws_from_another_thread_during_a_trace_are_not_recorded() -> None:
    import threading

    started, release = threading.Event(), threading.Event()
    seen: list[Any] = []

    def other() -> None:
        started.wait(10)
        seen.append(np.random.standard_normal(2))  # NumPy's own, while the trace runs
        release.set()

    def f(w: np.ndarray) -> Any:
        started.set()
        release.wait(10)
        return np.sum(w * np.random.standard_normal(2))

    t = threading.Thread(target=other)
    t.start()
    _, tape = yota.trace(f, np.ones(2))
    t.join()
    assert isinstance(seen[0], np.ndarray)
    assert len(tape.draws.events) == 1
