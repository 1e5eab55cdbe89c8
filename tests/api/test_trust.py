"""Trustworthy semantics (no silent wrong answer, no spurious failure): Python values taken
from traced arrays, values that would leave the trace, and what a trace leaves behind."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import yota
from yota.grad import RetraceWarning

BACKENDS = ["interp", "llvm"]


# -- 1. guards hold on the inputs that built the program -------------------------------------
def _h(x: np.ndarray) -> Any:
    m = float(np.mean(x))  # NumPy's pairwise mean; the compiled one may round otherwise
    return np.sum(x * x) * m


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_guard_passes_on_the_first_call_and_on_repeats(backend: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.standard_normal(1000)
        v1, g1 = yota.grad(_h, x, backend=backend)
        v2, g2 = yota.grad(_h, x, backend=backend)
        assert v1 == v2 and np.array_equal(g1[0], g2[0])
        m = float(np.mean(x))
        np.testing.assert_allclose(g1[0], 2 * x * m, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_forward_passes_its_guards_on_its_example(backend: str) -> None:
    x = np.random.default_rng(1).standard_normal(1000)
    cf = yota.compile(_h, x, backend=backend)
    assert float(cf(x)) == pytest.approx(float(_h(x)), rel=1e-12)
    y = x + 1.0  # another guard value: a retrace, not an error
    assert float(cf(y)) == pytest.approx(float(_h(y)), rel=1e-12)


def test_a_guard_is_reanchored_to_the_compiled_value() -> None:
    """The guard's expected value is what the compiled program computes (it may differ
    from NumPy's in the last bit), so the same inputs pass it on every later call."""
    from yota.ir import Builder, GuardFailed, TensorType

    from yota import pipeline

    b = Builder("g")
    x = b.input(TensorType("f64", (3,)))
    s = b.sum(x, axes=(0,))
    b.guard(s, expected=0.30000000000000004, kind="float")
    fn = b.build([s])
    e = GuardFailed("guard failed", guard_index=1, value=np.float64(0.3))
    anchored = pipeline.reanchor(fn, e)
    assert anchored is not None and anchored.ops[1].attrs["expected"] == 0.3
    assert pipeline.reanchor(fn, GuardFailed("?", guard_index=0, value=0.3)) is None


def test_a_guard_that_changes_every_call_warns_once_with_the_line() -> None:
    def loss(w: np.ndarray, x: np.ndarray) -> Any:
        scale = float(np.sum(x))  # a new value for every batch
        return np.sum((x @ w) ** 2) * scale

    w = np.ones(3)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(12):
            x = rng.random((4, 3))
            v, g = yota.grad(loss, w, x)
            assert float(v) == pytest.approx(float(loss(w, x)))
    found = [w for w in caught if issubclass(w.category, RetraceWarning)]
    assert len(found) == 1
    assert "test_trust.py" in str(found[0].message) and "float()" in str(found[0].message)


def test_guard_failures_never_reach_the_user_of_grad_compile_simplegrad() -> None:
    def f(x: np.ndarray) -> Any:
        if np.sum(x) > 0:
            return np.sum(x * x)
        return np.sum(-x)

    g = yota.simplegrad(f, np.ones(2))
    cf = yota.compile(f, np.ones(2))
    for x in (np.ones(2), -np.ones(2), np.ones(2), -2 * np.ones(2)):
        want = f(x)
        assert float(yota.grad(f, x)[0]) == want
        assert float(g(x)[0]) == want
        assert float(cf(x)) == want
    assert "yops.guard" in g.source and "assert" not in g.source


def test_play_of_a_tape_reports_the_failed_branch() -> None:
    def f(x: np.ndarray) -> Any:
        if np.sum(x) > 0:
            return np.sum(x * x)
        return np.sum(-x)

    _, tape = yota.trace(f, np.ones(2))
    with pytest.raises(yota.GuardFailed, match="test_trust.py"):
        yota.play(tape, -np.ones(2))


# -- 3. values that would leave the trace ---------------------------------------------------
def test_storing_a_traced_value_into_a_plain_array_is_an_error_naming_the_line() -> None:
    def f(x: np.ndarray) -> Any:
        y = np.array([0.0, 0.0])  # a plain array (np.zeros would make a traced one)
        y[0] = np.max(x)  # NumPy would call float(): the gradient would be lost
        return np.sum(y * 3.0)

    with pytest.raises(yota.UnsupportedError, match=r"test_trust.py:\d+ in f") as e:
        yota.grad(f, np.array([1.0, 2.0, 0.5]))
    assert "stored into a plain NumPy array" in str(e.value)


def test_a_traced_index_into_a_plain_array_is_a_guard() -> None:
    def f(x: np.ndarray) -> Any:
        onehot = np.zeros(3)
        onehot[np.argmax(x)] = 1.0  # the index is a Python int for this trace
        return np.sum(x * onehot)

    for x in (np.array([1.0, 2.0, 0.5]), np.array([3.0, 2.0, 0.5])):
        _, g = yota.grad(f, x)
        assert g[0].tolist() == np.eye(3)[int(np.argmax(x))].tolist()


@pytest.mark.parametrize("convert", [
    lambda t: t.tolist(), lambda t: complex(t), lambda t: np.asarray(t).view(np.int64),
    lambda t: math.exp(t)])
def test_other_ways_out_of_the_trace_are_errors(convert: Any) -> None:
    with pytest.raises(yota.YotaError):
        yota.grad(lambda x: np.sum(x) * 0.0 + float(np.sum(np.asarray(convert(np.sum(x))))),
                  np.ones(2))


def test_python_numbers_from_traced_values_are_constants_of_the_trace() -> None:
    def f(x: np.ndarray) -> Any:
        return np.sum(x) * float(np.sum(x))  # the second factor is a constant

    _, g = yota.grad(f, np.array([1.0, 2.0]))
    assert g[0].tolist() == [3.0, 3.0]


# -- 4. no tracer outlives the trace --------------------------------------------------------
class Dense:
    def __init__(self, W: np.ndarray) -> None:
        self.W = W
        self.calls = 0

    def forward(self, x: np.ndarray) -> Any:
        self.calls += 1
        self.last = x @ self.W  # layer code caches its input or output
        return self.last


LAYER = Dense(np.ones((3, 2)))
HISTORY: list[Any] = []


def _global_loss(x: np.ndarray) -> Any:
    y = LAYER.forward(x)
    HISTORY.append(y)
    return np.sum(y)


def test_a_layer_that_caches_on_itself_works_after_grad() -> None:
    before = LAYER.calls
    _, g = yota.grad(_global_loss, np.ones((4, 3)))
    assert g[0].tolist() == np.full((4, 3), 2.0).tolist()
    assert not hasattr(LAYER, "last") and HISTORY == []
    assert LAYER.calls == before + 1  # other changes stay: they happened while tracing
    out = LAYER.forward(np.ones((1, 3)))  # plain NumPy again
    assert isinstance(out, np.ndarray) and isinstance(LAYER.last, np.ndarray)


def test_a_bound_method_and_a_closure_are_restored() -> None:
    layer = Dense(np.ones((3, 2)))
    layer.last = np.zeros(2)
    _ = yota.grad(lambda x: np.sum(layer.forward(x)), np.ones((2, 3)))
    assert isinstance(layer.last, np.ndarray) and layer.last.tolist() == [0.0, 0.0]

    seen: dict[str, Any] = {}

    def loss(x: np.ndarray) -> Any:
        seen["y"] = x * 2.0
        return np.sum(seen["y"])

    _ = yota.grad(loss, np.ones(2))
    assert "y" not in seen


# -- 6. only YotaErrors escape (the cases of the issue) -------------------------------------
def test_range_as_an_index_works_like_numpy() -> None:
    x = np.arange(9.0).reshape(3, 3)
    f = lambda x: np.sum(x[[0, 1], range(2)]) + np.sum(x[range(1, 3)] * 2.0)  # noqa: E731
    v, g = yota.grad(f, x)
    assert float(v) == pytest.approx(float(f(x)))
    assert g[0].tolist() == [[1, 0, 0], [2, 3, 2], [2, 2, 2]]


def test_an_untraced_array_method_is_a_yota_error_and_an_attribute_error() -> None:
    with pytest.raises(yota.UnsupportedError, match="ndarray.searchsorted"):
        yota.grad(lambda x: np.sum(x.searchsorted(0.5)), np.ones(3))
    with pytest.raises(AttributeError):
        yota.grad(lambda x: np.sum(x.not_an_ndarray_attribute), np.ones(3))


@pytest.mark.parametrize("backend", ["interp", "llvm", "cuda-emulated"])
def test_every_backend_reports_the_guarded_value_so_a_guard_can_be_reanchored(
        backend: str) -> None:
    """A guard whose expected value is off by one ulp (as NumPy's mean against a compiled
    one can be) fails with the value the program computed; re-anchored to it, the program
    passes on the same inputs."""
    from yota.backends import get_backend
    from yota.ir import Builder, GuardFailed, TensorType

    from yota import pipeline

    b = Builder("mean_guard")
    x = b.input(TensorType("f64", (5,)))
    m = b.div(b.sum(x, axes=(0,)), b.const(5.0, "f64", ()))
    x0 = np.random.default_rng(3).standard_normal(5)
    true = float(np.sum(x0) / 5.0)
    b.guard(m, expected=float(np.nextafter(true, np.inf)), kind="float")
    fn = b.build([m])
    if backend == "cuda-emulated":
        from support.cuda_cases import emulator
        from yota.backends import cuda
        from yota.backends.cuda.emulate import emulation_available

        why = emulation_available()
        if why:
            pytest.skip(why)

        def compile_(f: Any) -> Any:
            return cuda.compile(f, device=emulator([f]))
    else:
        compile_ = get_backend(backend).compile
    with pytest.raises(GuardFailed) as e:
        compile_(fn)(x0)
    assert e.value.value is not None
    anchored = pipeline.reanchor(fn, e.value)
    assert anchored is not None
    (got,) = compile_(anchored)(x0)
    assert float(np.asarray(got)) == float(e.value.value)
